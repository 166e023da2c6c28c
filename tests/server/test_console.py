"""The console's pages in process: access by token then cookie, and the numbers it shows."""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest

from deepgym.models import CaseResult, RunResult, ServiceTime, Totals
from deepgym.server.console import COOKIE
from deepgym.server.svg import bin_edges, histogram_svg, quantile
from deepgym.store import RunStore
from tests.server.conftest import CONSOLE_TOKEN, fake_app


def mixed_results() -> list[RunResult]:
    """Passes, a partial fail with per-test results, and two runs without a verdict."""
    cases = [
        CaseResult(name="test_0", passed=True),
        CaseResult(name="test_1", passed=False, message="expected 3, got <None>"),
    ]
    out = []
    for i in range(10):
        if i in (3, 7):
            r = RunResult.no_verdict(
                "sandbox_error" if i == 3 else "timeout",
                f"cause number {i}",
                env_name="two_sum",
            )
        elif i % 2:
            r = RunResult(score=0.5, passed=False, env_name="fizzbuzz", cases=cases)
        else:
            r = RunResult(score=1.0, passed=True, env_name="two_sum", cases=cases[:1])
        out.append(r.model_copy(update={"service": ServiceTime(total_ms=5.0 + i * 7)}))
    return out


def stored_run(store: RunStore) -> tuple[str, list[RunResult]]:
    results = mixed_results()
    names = [r.env_name or "" for r in results]
    run_id = store.create_run("batch", "two_sum", names, ["x"] * len(results))
    for i, r in enumerate(results):
        store.record(run_id, i, r)
    store.finish(run_id)
    return run_id, results


class _Ids(HTMLParser):
    """Text of each element with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str | None] = []
        self.text: dict[str, str] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("meta", "br", "line", "rect", "path"):
            return
        self.stack.append(dict(attrs).get("id"))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("meta", "br", "line", "rect", "path"):
            return
        if self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for key in self.stack:
            if key:
                self.text[key] = self.text.get(key, "") + data


def ids(html: str) -> _Ids:
    p = _Ids()
    p.feed(html)
    return p


BROWSER = {"Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate"}
"""What a browser sends when it opens a page (Fetch Metadata)."""


def get(
    app: Any,
    *paths: str,
    cookies: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> list[httpx.Response]:
    """GET each path in turn, without following redirects."""

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers=headers
        ) as c:
            if cookies:
                c.cookies.update(cookies)
            return [await c.get(p) for p in paths]

    return asyncio.run(go())


@pytest.fixture
def console_app(store: RunStore) -> Any:
    return fake_app(store=store, console_token=CONSOLE_TOKEN, api=False)[0]


def _the_cookie(response: httpx.Response) -> None:
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={CONSOLE_TOKEN}")
    for attr in ("HttpOnly", "SameSite=strict", "Path=/console"):
        assert attr.lower() in cookie.lower()


def test_a_browser_brings_the_token_once_then_a_cookie(console_app: Any) -> None:
    none, wrong, right = get(
        console_app,
        "/console",
        "/console?token=nope",
        f"/console?token={CONSOLE_TOKEN}",
        headers=BROWSER,
    )
    assert none.status_code == 401 and wrong.status_code == 401
    assert "Console token needed" in none.text
    # Sent on to the address without the token: it leaves the address bar.
    assert right.status_code == 303 and right.headers["location"] == "/console"
    _the_cookie(right)
    (ok,) = get(console_app, "/console", cookies={COOKIE: CONSOLE_TOKEN}, headers=BROWSER)
    assert ok.status_code == 200
    (bad,) = get(console_app, "/console", cookies={COOKIE: "guess"}, headers=BROWSER)
    assert bad.status_code == 401


def test_the_printed_url_serves_the_page_to_any_client(console_app: Any, store: RunStore) -> None:
    # curl on the URL `deepgym serve` prints: the page itself, not an empty redirect.
    run_id, _ = stored_run(store)
    runs, run, wrong = get(
        console_app,
        f"/console?token={CONSOLE_TOKEN}",
        f"/console/runs/{run_id}?token={CONSOLE_TOKEN}&page=0",
        "/console?token=nope",
    )
    assert runs.status_code == 200 and f'data-run="{run_id}"' in runs.text
    assert run.status_code == 200 and f'<span id="run-id">{run_id}</span>' in run.text
    _the_cookie(runs)
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    (none,) = get(console_app, "/console")
    assert none.status_code == 401


def test_the_token_redirect_keeps_other_parameters(console_app: Any, store: RunStore) -> None:
    run_id, _ = stored_run(store)
    (r,) = get(console_app, f"/console/runs/{run_id}?token={CONSOLE_TOKEN}&page=0", headers=BROWSER)
    assert r.status_code == 303 and r.headers["location"] == f"/console/runs/{run_id}?page=0"


def test_the_api_is_off_in_a_console_only_app(console_app: Any) -> None:
    (r,) = get(console_app, "/v1/environments")
    assert r.status_code == 404


def test_run_page_shows_the_stores_totals_side_by_side(console_app: Any, store: RunStore) -> None:
    run_id, results = stored_run(store)
    (page,) = get(console_app, f"/console/runs/{run_id}", cookies={COOKIE: CONSOLE_TOKEN})
    assert page.status_code == 200
    t = Totals.of(results)
    assert t == store.run(run_id).totals
    text = ids(page.text).text
    assert text["headline-pass-rate"] == f"{t.pass_rate:.2%}" == "50.00%"
    assert text["headline-passed"] == "5" and text["headline-total"] == "10"
    assert text["headline-avg-score"] == f"{t.avg_score:.3f}" == "0.650"
    assert text["no-verdict-count"] == "2"
    assert text["judged-pass-rate"] == f"{t.judged_pass_rate:.2%}" == "62.50%"
    assert text["judged-mean-score"] == f"{t.judged_mean_score:.3f}" == "0.812"
    assert text["judged-count"] == "8"
    # each no-verdict cause, and no score for those runs
    assert (
        "cause number 3" in text["no-verdict-runs"] and "cause number 7" in text["no-verdict-runs"]
    )
    rows = re.findall(r'<tr data-index="(\d+)">(.*?)</tr>(?=<tr data-index|</table>)', page.text)
    by_index = dict(rows)
    assert (
        "No verdict (sandbox_error)" in by_index["3"] and '<td class="num">—</td>' in by_index["3"]
    )
    assert "No verdict (timeout)" in by_index["7"]
    assert "PASS" in by_index["0"] and "1.000" in by_index["0"]
    # per-test breakdown
    assert "1/2 passed" in by_index["1"] and "expected 3, got &lt;None&gt;" in by_index["1"]
    # a histogram per environment
    assert page.text.count("<svg") == 2
    assert 'aria-label="service time, fizzbuzz"' in page.text


def test_pages_fetch_nothing_and_say_so(console_app: Any, store: RunStore) -> None:
    run_id, _ = stored_run(store)
    pages = get(
        console_app,
        "/console",
        f"/console/runs/{run_id}",
        "/console/environments",
        cookies={COOKIE: CONSOLE_TOKEN},
    )
    for page in pages:
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp
        parsed = ids(page.text)
        for tag, attrs in parsed.tags:
            assert tag not in ("script", "link", "img", "iframe"), tag
            assert "src" not in attrs
            href = attrs.get("href") or ""
            assert not href or href.startswith("/console"), href
        assert "http" not in re.sub(r'xmlns="http://www\.w3\.org/2000/svg"', "", page.text)


def test_runs_page_lists_headline_and_judged(console_app: Any, store: RunStore) -> None:
    run_id, _ = stored_run(store)
    (page,) = get(console_app, "/console", cookies={COOKIE: CONSOLE_TOKEN})
    (row,) = re.findall(rf'<tr data-run="{run_id}">(.*?)</tr>', page.text)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[5:] == ["10", "50.00%", "0.650", "2", "62.50%", "0.812"]


def test_unknown_run_and_incomplete_run(console_app: Any, store: RunStore) -> None:
    run_id = store.create_run("eval", "a,b", ["a", "b"], ["x", "y"])
    store.record(run_id, 0, RunResult(score=1.0, passed=True, env_name="a"))
    missing, partial = get(
        console_app,
        "/console/runs/nope",
        f"/console/runs/{run_id}",
        cookies={COOKIE: CONSOLE_TOKEN},
    )
    assert missing.status_code == 404 and "No such run" in missing.text
    assert "incomplete (1/2)" in partial.text and "not recorded" in partial.text


def test_script_in_stored_text_is_escaped(console_app: Any, store: RunStore) -> None:
    evil = RunResult.no_verdict("sandbox_error", "<script>alert(1)</script>", env_name="<b>x</b>")
    run_id = store.create_run("batch", "<i>src</i>", ["<b>x</b>"], ["x"])
    store.record(run_id, 0, evil)
    (page,) = get(console_app, f"/console/runs/{run_id}", cookies={COOKIE: CONSOLE_TOKEN})
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert "<b>x</b>" not in page.text


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/deepgym/deepgym_judge/harness.py", line 359, in judge\n'
    "    report = drive(j)\n"
    '  File "/judge/envs/0a1b/verifier.py", line 7, in verify\n'
    "    return helper(got)\n"
    "KeyError: '<missing>'\n"
)


def test_causes_are_short_with_the_full_text_behind_them(console_app: Any, store: RunStore) -> None:
    crashed = RunResult.no_verdict("verifier_error", TRACEBACK, env_name="e")
    failed = RunResult(score=0.0, passed=False, error_type="solution_error", error=TRACEBACK)
    run_id = store.create_run("batch", "e", ["e", "e"], ["x", "y"])
    store.record(run_id, 0, crashed)
    store.record(run_id, 1, failed)
    (page,) = get(console_app, f"/console/runs/{run_id}", cookies={COOKIE: CONSOLE_TOKEN})
    short = "KeyError: &#x27;&lt;missing&gt;&#x27; (verifier.py:7 in verify)"
    summaries = re.findall(r"<summary>(.*?)</summary>", page.text)
    assert summaries == [short] * 3  # the no-verdict table, and each run's row
    assert all("deepgym_judge" not in s for s in summaries)
    assert "<pre>Traceback (most recent call last):" in page.text  # the full text, on a click
    assert "<missing>" not in page.text


def test_run_times_leave_out_the_wait_for_a_sandbox(console_app: Any, store: RunStore) -> None:
    """One definition of service time: a cold pool's 145 ms wait is not shown as the run's."""
    cold = RunResult(
        score=1.0,
        passed=True,
        env_name="e",
        service=ServiceTime(queue_ms=145.0, start_ms=2.0, verifier_ms=10.0, total_ms=157.0),
    )
    run_id = store.create_run("batch", "e", ["e"], ["x"])
    store.record(run_id, 0, cold)
    (page,) = get(console_app, f"/console/runs/{run_id}", cookies={COOKIE: CONSOLE_TOKEN})
    assert ">Run ms (no queue)</th>" in page.text and "Service ms" not in page.text
    (row,) = re.findall(r'<tr data-index="0">(.*?)</tr>', page.text)
    assert row.endswith('<td class="num">12.0</td>') and "157.0" not in row
    assert "without the wait for a sandbox" in page.text  # the charts say which time they show


# --- the histogram ------------------------------------------------------------------------------


def test_bin_edges_and_quantiles() -> None:
    assert bin_edges(1.0, 2.0, 4) == [1.0, 1.25, 1.5, 1.75, 2.0]
    log = bin_edges(1.0, 1000.0, 3)
    assert [round(x, 6) for x in log] == [1.0, 10.0, 100.0, 1000.0]
    assert bin_edges(5.0, 5.0, 2) == [5.0, 5.5, 6.0]
    assert quantile([1.0, 2.0, 3.0], 0.5) == 2.0 and quantile([], 0.5) == 0.0


def test_histogram_counts_every_value() -> None:
    values = [1.0] * 5 + [10.0] * 3 + [900.0]
    svg = histogram_svg(values, title="t<&>")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    counts = [int(c) for c in re.findall(r": (\d+) runs?</title>", svg)]
    assert sum(counts) == len(values) and max(counts) == 5
    assert "t&lt;&amp;&gt;" in svg and "9 runs, p50 1.0 ms, p99 900 ms" in svg
    assert "no runs" in histogram_svg([], title="empty")
    assert "1 run" in histogram_svg([float("nan"), 3.0], title="one")
