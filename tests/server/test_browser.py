"""The console in a real headless Chromium (Debian's, driven by Playwright).

``scripts/ensure-browser.sh`` installs the browser (``make test`` runs it first). The test loads
the console with its launch token, follows the link to a run, and reads the totals off the page.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.server.runner import ThreadedServer
from deepgym.store import RunStore
from tests.fakes import FakeBackend
from tests.server.conftest import CONSOLE_TOKEN, TOKEN

SCREENSHOT = Path(os.environ.get("DEEPGYM_CONSOLE_SCREENSHOT", "/tmp/deepgym-console.png"))


def _chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("no Chromium here: run scripts/ensure-browser.sh (make test does)")
    return path


@pytest.mark.browser
def test_console_in_chromium_shows_the_stores_numbers(
    served: tuple[ThreadedServer, FakeBackend], store: RunStore
) -> None:
    from playwright.sync_api import sync_playwright

    server, _ = served
    answers = ["pass", "fail", "down", "pass", "pass", "down", "fail", "pass"]
    with DeepGym(mode="remote", url=server.url, token=TOKEN) as dg:
        batch = dg.run_batch("two_sum", answers, group_size=4)
    (info,) = store.runs()
    assert info.complete and info.totals == batch.totals
    t = info.totals
    assert (t.passed, t.no_verdict_count, t.judged_count) == (4, 2, 6)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium())
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{server.url}/console?token={CONSOLE_TOKEN}")
            assert page.url == f"{server.url}/console"  # the token left the address bar
            page.click(f"a[href='/console/runs/{info.id}']")
            page.wait_for_selector("#headline-pass-rate")
            assert page.url == f"{server.url}/console/runs/{info.id}"
            shown = {
                k: page.inner_text(f"#{k}")
                for k in (
                    "headline-pass-rate",
                    "headline-passed",
                    "headline-total",
                    "headline-avg-score",
                    "no-verdict-count",
                    "judged-pass-rate",
                    "judged-count",
                    "judged-mean-score",
                )
            }
            assert shown == {
                "headline-pass-rate": f"{t.pass_rate:.2%}",
                "headline-passed": str(t.passed),
                "headline-total": str(t.total),
                "headline-avg-score": f"{t.avg_score:.3f}",
                "no-verdict-count": str(t.no_verdict_count),
                "judged-pass-rate": f"{t.judged_pass_rate:.2%}",
                "judged-count": str(t.judged_count),
                "judged-mean-score": f"{t.judged_mean_score:.3f}",
            }
            assert shown["headline-pass-rate"] == "50.00%"
            assert shown["judged-pass-rate"] == "66.67%"
            nv_rows = page.locator("#no-verdict-runs tr").count() - 1
            assert nv_rows == t.no_verdict_count
            verdicts = page.locator("#results tr[data-index] td:nth-child(3)").all_inner_texts()
            assert verdicts.count("No verdict (sandbox_error)") == 2
            assert page.locator("svg[role=img]").count() == 1
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            # a second visit needs no token: the cookie carries it
            other = browser.new_page()
            other.goto(f"{server.url}/console")
            assert "Console token needed" in other.content()
            page.goto(f"{server.url}/console")
            assert page.locator(f"tr[data-run='{info.id}']").count() == 1
        finally:
            browser.close()
    assert SCREENSHOT.stat().st_size > 10_000
