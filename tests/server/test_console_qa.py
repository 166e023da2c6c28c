"""The console's QA pages: a kept report rendered, its hostile text escaped, behind the token,
a 404 for an unknown report; and the mutation-score chart."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deepgym.server.console import COOKIE
from deepgym.server.svg import scores_svg
from deepgym.store import RunStore
from tests.envs.qa_sample import HOSTILE, sample_entries
from tests.server.conftest import CONSOLE_TOKEN, fake_app
from tests.server.test_console import BROWSER, get, ids

SIGNED = {COOKIE: CONSOLE_TOKEN}


@pytest.fixture
def console_app(store: RunStore) -> Any:
    return fake_app(store=store, console_token=CONSOLE_TOKEN, api=False)[0]


@pytest.fixture
def report_id(store: RunStore) -> str:
    return store.save_qa_report(sample_entries(), {"command": "qa", "sandbox": "pool"})


def _rows(html: str) -> dict[str, list[str]]:
    """Each environment's row of the report's table: its cells' text, tags stripped."""
    table = html[html.index('<table id="qa-envs">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r'<tr data-env="([^"]*)">(.*?)</tr>', table)
    return {
        env: [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for env, row in rows
    }


def test_the_report_page_shows_every_environment(console_app: Any, report_id: str) -> None:
    (page,) = get(console_app, f"/console/qa/{report_id}", cookies=SIGNED)
    assert page.status_code == 200
    text = ids(page.text).text
    assert text["qa-id"] == report_id and text["qa-passed"] == "2/3"
    rows = _rows(page.text)
    assert list(rows) == ["coin_change", "fizzbuzz", "agent/fix_add"]
    # environment, kind, checks, wrong answers, probes, mutants, equivalent, killed, survived,
    # undecided (none in a report kept before they were counted), no verdict, score,
    # threshold, seconds
    assert rows["coin_change"] == [
        "coin_change",
        "function",
        "ok",
        "3/3 held",
        "2/2 held",
        "21",
        "1",
        "19",
        "1",
        "0",
        "0",
        "0.950",
        "0.90",
        "12.5",
    ]
    assert rows["fizzbuzz"][2:5] == ["FAILED (1 of 8)", "2/3 held", "2/2 held"]
    assert rows["fizzbuzz"][11] == "0.800"
    assert rows["agent/fix_add"][1:5] == ["session", "ok", "1/1 held", "-"]
    assert rows["agent/fix_add"][5:] == ["-"] * 9
    assert 'class="num fail">0.800' in page.text and 'class="num pass">0.950' in page.text
    # the checks' messages, grouped; each survivor's diff and the input that kills it
    assert "constant[0] scored 0.40" in page.text and "Exploit probes" in page.text
    assert "<pre>--- reference\n+++ mutant\n-    best = 0\n+    best = 1\n</pre>" in page.text
    assert "<code>coin_change([2], 3)</code>" in page.text
    assert "No input that tells it from the reference was found." in page.text
    assert "agreed with the reference on 200 generated inputs" in page.text
    assert "<summary>1 likely equivalent mutant, left out of the score</summary>" in page.text
    assert "No mutation testing in this report." in page.text  # the session
    # one bar per scored environment, and the threshold line
    assert page.text.count("<svg") == 1 and "<title>threshold 0.90</title>" in page.text
    assert "<title>coin_change: 0.950</title>" in page.text


def test_an_ungated_score_below_the_threshold_is_reported_not_failed(
    console_app: Any, store: RunStore
) -> None:
    entries = sample_entries()
    mutation = {**entries[1]["mutation"], "env": "agent/fix_add", "kind": "session"}
    entries[2]["mutation"] = {**mutation, "gated": False}
    rid = store.save_qa_report(entries, {"command": "qa", "mutants": True})
    (page,) = get(console_app, f"/console/qa/{rid}", cookies=SIGNED)
    assert 'class="num muted">0.800' in page.text and 'class="num fail">0.800' in page.text
    assert page.text.count("below, reported as it is") == 1


def test_undecided_mutants_are_shown_apart_with_why(console_app: Any, store: RunStore) -> None:
    entries = sample_entries()
    undecided = {
        "id": "coin_change-u1",
        "operator": "constant",
        "line": 3,
        "description": f"`1` to `2` {HOSTILE}",
        "diff": "-    x = 1\n+    x = 2\n",
        "why": "no input told it apart, but it agreed on only 17 distinct inputs",
        "agreed": 17,
    }
    entries[0]["mutation"].update(undecided=1, undecideds=[undecided])
    rid = store.save_qa_report(entries, {"command": "qa", "mutants": True})
    (page,) = get(console_app, f"/console/qa/{rid}", cookies=SIGNED)
    assert _rows(page.text)["coin_change"][9] == "1"
    assert "1 undecided (counted as survivors)" in page.text
    assert "Undecided coin_change-u1: constant, line 3" in page.text
    assert "agreed on only 17 distinct inputs" in page.text and HOSTILE not in page.text


def test_hostile_text_in_a_report_is_escaped(console_app: Any, store: RunStore) -> None:
    entries = sample_entries()
    entries[0]["env"] = "<b>env</b>"
    entries[0]["checks"][0]["message"] = HOSTILE
    entries[1]["kind"] = "<i>kind</i>"
    rid = store.save_qa_report(entries, {"command": "<u>qa</u>"})
    pages = get(console_app, f"/console/qa/{rid}", "/console/qa", cookies=SIGNED)
    for page in pages:
        assert page.status_code == 200
        for raw in (HOSTILE, "<b>env</b>", "<i>kind</i>", "<u>qa</u>", "<img"):
            assert raw not in page.text
    detail = pages[0].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    assert "-    out.append(&#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;)" in detail
    assert "&lt;b&gt;env&lt;/b&gt;" in detail
    parsed = ids(detail)
    assert all(tag not in ("script", "i", "u") for tag, _ in parsed.tags)


def test_the_list_page_summarises_each_report(
    console_app: Any, store: RunStore, report_id: str
) -> None:
    newer = store.save_qa_report([{"env": "a", "ok": False, "checks": []}], {"command": "check"})
    (page,) = get(console_app, "/console/qa", cookies=SIGNED)
    assert page.status_code == 200
    found = re.findall(r'<tr data-qa="([^"]+)">(.*?)</tr>', page.text)
    assert [rid for rid, _ in found] == [newer, report_id]  # the newest first
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", found[1][1])]
    assert cells[0] == report_id and cells[2] == "command qa · sandbox pool"
    assert cells[3:] == ["3", "2/3", "0.875", "0.800"]
    assert found[0][1].count("—") == 2  # no mutation score: none shown
    assert f'href="/console/qa/{report_id}"' in page.text


def test_no_report_yet_and_an_unknown_one(console_app: Any) -> None:
    listing, missing = get(console_app, "/console/qa", "/console/qa/qa-nope", cookies=SIGNED)
    assert listing.status_code == 200 and "No QA report kept yet" in listing.text
    assert missing.status_code == 404 and "No such QA report" in missing.text


def test_the_qa_pages_need_the_token(console_app: Any, report_id: str) -> None:
    for path in ("/console/qa", f"/console/qa/{report_id}"):
        none, wrong, guessed = (
            *get(console_app, path, f"{path}?token=nope"),
            *get(console_app, path, cookies={COOKIE: "guess"}),
        )
        assert none.status_code == wrong.status_code == guessed.status_code == 401
        assert report_id not in none.text + wrong.text + guessed.text
        (browser,) = get(console_app, f"{path}?token={CONSOLE_TOKEN}", headers=BROWSER)
        assert browser.status_code == 303 and browser.headers["location"] == path
        (curl,) = get(console_app, f"{path}?token={CONSOLE_TOKEN}")
        assert curl.status_code == 200 and report_id in curl.text


def test_every_page_links_the_qa_reports_and_fetches_nothing(
    console_app: Any, report_id: str
) -> None:
    for page in get(
        console_app, "/console", "/console/qa", f"/console/qa/{report_id}", cookies=SIGNED
    ):
        assert '<a href="/console/qa">QA</a>' in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
        for tag, attrs in ids(page.text).tags:
            assert tag not in ("script", "link", "img", "iframe"), tag
            assert "src" not in attrs
            href = attrs.get("href") or ""
            assert not href or href.startswith(("/console", "#")), href


def test_a_console_without_a_store_says_so(store: RunStore) -> None:
    app = fake_app(store=None, console_token=CONSOLE_TOKEN, api=False)[0]
    listing, one = get(app, "/console/qa", "/console/qa/qa-x", cookies=SIGNED)
    assert listing.status_code == 200 and "keeps no run store" in listing.text
    assert one.status_code == 404


# --- the chart ----------------------------------------------------------------------------------


def test_the_scores_chart_marks_the_threshold() -> None:
    svg = scores_svg([("a<b", 0.95), ("c", 0.5), ("d", None)], threshold=0.9, width=448)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    bars = re.findall(r'<rect x="200" y="[\d.]+" width="([\d.]+)" height="12" fill="(#\w+)">', svg)
    # 448 wide: 200 for the labels, 48 on the right, 200 for the bars
    assert bars == [("190.0", "#2a7d2a"), ("100.0", "#b03030")]
    assert '<line x1="380.0"' in svg  # the threshold, 90% along
    assert "a&lt;b" in svg and "a<b" not in svg and "no score" in svg
    assert "no environments" in scores_svg([], threshold=0.9)
