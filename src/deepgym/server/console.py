"""The web console: stored runs, their totals, results and service times, as plain HTML.

- ``/console``: every run, headline and judged totals side by side.
- ``/console/runs/<id>``: a run's totals, its no-verdict causes, a service-time histogram per
  environment, and every result with its per-test breakdown.
- ``/console/environments``: service-time histograms per environment over the latest results.
- ``/console/qa``: the kept QA reports (``deepgym qa`` and ``check``), each with how many
  environments passed every check and its mean and lowest mutation score.
- ``/console/qa/<id>``: one report: per environment its checks (the reference's, the wrong
  answers that must score nothing, the exploit probes that must fail), its mutation testing
  against the threshold (a bar chart of every score), and each surviving mutant as a diff with
  the input that would have killed it.

Service time is ``ServiceTime.run_ms`` everywhere here: the run itself, without the wait for a
sandbox, and every label says so. A cause is shown short (``deepgym.text.short_cause``: the
exception and the verifier's own frame), with the full text a click away.

A run without a verdict keeps no score here: it shows as "No verdict (<error_type>)" with its
cause, and is counted in "No verdict", beside the judged pass rate and mean score; the headline
numbers count it as a failed 0 (the contract's totals, from ``Totals``).

Access: a per-launch token, given once as ``?token=`` and then kept in a cookie (HttpOnly,
SameSite=Strict). The URL with the token serves the page itself (and sets the cookie) to any
client, ``curl`` included; a browser opening it (``Sec-Fetch-Dest: document``) is redirected to
the same address without the token, so that the token leaves its address bar.
Pages are drawn on the server: no script, no external style, nothing fetched from the network
(the Content-Security-Policy says so to the browser too).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from deepgym.exceptions import ConfigError
from deepgym.models import RunResult, Totals
from deepgym.server.console_qa import qa_list_page, qa_page
from deepgym.server.svg import histogram_svg
from deepgym.store import RunInfo, RunStore
from deepgym.text import percent, short_cause, utc_time

__all__ = ["COOKIE", "add_console"]

COOKIE = "deepgym_console"
PAGE_ROWS = 500
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'"

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
a{color:#1f5fa8}table{border-collapse:collapse;margin:8px 0}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f4f4f6;font-weight:600}td.num,th.num{text-align:right}
.pass{color:#1c7c1c;font-weight:600}.fail{color:#b3261e;font-weight:600}
.nv{color:#8a5a00;font-weight:600}.muted{color:#666}
.totals{display:flex;gap:16px;flex-wrap:wrap}
.panel{border:1px solid #ccc;border-radius:6px;padding:10px 16px;min-width:220px}
.panel h3{margin:0 0 6px;font-size:14px}.panel p{margin:0 0 6px;font-size:12px;color:#555}
dl{display:grid;grid-template-columns:auto auto;gap:2px 16px;margin:0}
dt{color:#444}dd{margin:0;font-weight:600;text-align:right}
.big{font-size:22px}.charts{display:flex;flex-wrap:wrap;gap:12px}
details summary{cursor:pointer}nav{margin-bottom:12px}
.pass,.fail{white-space:nowrap}
"""


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} · deepgym console</title><style>{_STYLE}</style></head>"
        f'<body><nav><a href="/console">Runs</a> · <a href="/console/episodes">Episodes</a> · '
        f'<a href="/console/environments">Environments</a> · <a href="/console/qa">QA</a></nav>'
        f"{body}</body></html>"
    )
    headers = {
        "Content-Security-Policy": CSP,
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    return HTMLResponse(html, status_code=status, headers=headers)


def _status(info: RunInfo) -> str:
    if info.status == "complete" and info.recorded == info.total:
        return "complete"
    if info.status == "running":
        return f"incomplete ({info.recorded}/{info.total})"
    return f"{info.status} ({info.recorded}/{info.total})"


# ---------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------


def _runs_page(store: RunStore | None) -> str:
    if store is None:
        return "<h1>Runs</h1><p>This service keeps no run store.</p>"
    runs = store.runs(limit=200)
    if not runs:
        return "<h1>Runs</h1><p>No runs stored yet.</p>"
    head = (
        "<tr><th>Run</th><th>Kind</th><th>Source</th><th>Started</th><th>Status</th>"
        '<th class="num">Runs</th><th class="num">Pass rate</th><th class="num">Avg score</th>'
        '<th class="num">No verdict</th><th class="num">Judged pass rate</th>'
        '<th class="num">Judged mean score</th></tr>'
    )
    rows = []
    for r in runs:
        t = r.totals
        rows.append(
            f'<tr data-run="{escape(r.id)}"><td><a href="/console/runs/{escape(r.id)}">'
            f"{escape(r.id)}</a></td><td>{escape(r.kind)}</td><td>{escape(r.source)}</td>"
            f"<td>{utc_time(r.created)}</td><td>{escape(_status(r))}</td>"
            f'<td class="num">{t.total}</td><td class="num">{percent(t.pass_rate)}</td>'
            f'<td class="num">{t.avg_score:.3f}</td><td class="num">{t.no_verdict_count}</td>'
            f'<td class="num">{percent(t.judged_pass_rate)}</td>'
            f'<td class="num">{t.judged_mean_score:.3f}</td></tr>'
        )
    return (
        "<h1>Runs</h1><p class=muted>Headline numbers count a run without a verdict as a failed "
        "0; judged numbers leave it out.</p>"
        f'<table id="runs">{head}{"".join(rows)}</table>'
    )


def _totals_html(t: Totals) -> str:
    return (
        '<div class="totals">'
        '<div class="panel"><h3>Headline</h3><p>A run without a verdict counts as a failed 0.</p>'
        f'<dl><dt>Pass rate</dt><dd id="headline-pass-rate" class="big">{percent(t.pass_rate)}</dd>'
        f'<dt>Passed</dt><dd><span id="headline-passed">{t.passed}</span> / '
        f'<span id="headline-total">{t.total}</span></dd>'
        f'<dt>Avg score</dt><dd id="headline-avg-score">{t.avg_score:.3f}</dd></dl></div>'
        '<div class="panel"><h3>No verdict</h3><p>The sandbox or verifier failed: not judged.</p>'
        f'<dl><dt>No verdict</dt><dd id="no-verdict-count" class="big">{t.no_verdict_count}'
        "</dd></dl></div>"
        '<div class="panel"><h3>Judged only</h3><p>Runs with a verdict.</p>'
        f'<dl><dt>Judged pass rate</dt><dd id="judged-pass-rate" class="big">'
        f"{percent(t.judged_pass_rate)}</dd>"
        f'<dt>Judged</dt><dd id="judged-count">{t.judged_count}</dd>'
        f'<dt>Judged mean score</dt><dd id="judged-mean-score">{t.judged_mean_score:.3f}</dd>'
        "</dl></div></div>"
    )


def _verdict_cell(r: RunResult) -> tuple[str, str]:
    """The verdict and the score cell: a run without a verdict keeps no score."""
    if not r.has_verdict:
        return f'<span class="nv">No verdict ({escape(r.error_type or "verifier")})</span>', "—"
    if r.passed:
        return '<span class="pass">PASS</span>', f"{r.score:.3f}"
    return '<span class="fail">FAIL</span>', f"{r.score:.3f}"


def _cases_html(r: RunResult) -> str:
    if not r.cases:
        return '<span class="muted">-</span>'
    ok = sum(c.passed for c in r.cases)
    rows = "".join(
        f"<tr><td>{escape(c.name)}</td><td>{'yes' if c.passed else 'no'}</td>"
        f"<td class=num>{'-' if c.score is None else f'{c.score:.2f}'}</td>"
        f"<td>{escape(c.message)}</td></tr>"
        for c in r.cases
    )
    return (
        f"<details><summary>{ok}/{len(r.cases)} passed</summary><table>"
        f"<tr><th>Test</th><th>Passed</th><th>Score</th><th>Message</th></tr>{rows}"
        "</table></details>"
    )


RUN_TIME_LABEL = "Run ms (no queue)"
"""The column of a run's service time (``ServiceTime.run_ms``)."""
RUN_TIME_NOTE = "service time: the run itself, without the wait for a sandbox"


def _error_html(error: str) -> str:
    """A run's error: the short cause, and the full text behind it where they differ."""
    short = short_cause(error)
    if short == error.strip():
        return escape(short)
    return f"<details><summary>{escape(short)}</summary><pre>{escape(error)}</pre></details>"


def _cause(r: RunResult) -> str:
    """Why a run did not pass (HTML): its error, or its first failed test."""
    if r.passed:
        return ""
    if r.error_type or r.error:
        kind = escape(r.error_type or "error")
        return f"{kind}: {_error_html(r.error)}" if r.error else kind
    failed = next((c for c in r.cases if not c.passed), None)
    if failed is None:
        return ""
    return escape(f"{failed.name}: {failed.message}" if failed.message else f"{failed.name} failed")


def _no_verdict_html(results: dict[int, RunResult]) -> str:
    nv = [(i, r) for i, r in sorted(results.items()) if not r.has_verdict]
    if not nv:
        return "<h2>No-verdict causes</h2><p>Every recorded run was judged.</p>"
    by_type: dict[str, int] = {}
    for _, r in nv:
        key = r.error_type or "verifier exit 2"
        by_type[key] = by_type.get(key, 0) + 1
    counts = "".join(
        f'<tr><td>{escape(k)}</td><td class="num">{n}</td></tr>' for k, n in sorted(by_type.items())
    )
    rows = "".join(
        f'<tr><td class="num">{i}</td><td>{escape(r.env_name or "-")}</td>'
        f"<td>{escape(r.error_type or '-')}</td>"
        f"<td>{_error_html(r.error) if r.error else '-'}</td></tr>"
        for i, r in nv[:PAGE_ROWS]
    )
    return (
        "<h2>No-verdict causes</h2>"
        f'<table id="no-verdict-types"><tr><th>Error type</th><th class="num">Runs</th></tr>'
        f"{counts}</table>"
        '<table id="no-verdict-runs"><tr><th class="num">#</th><th>Environment</th>'
        f"<th>Error type</th><th>Cause</th></tr>{rows}</table>"
    )


def _charts(times: dict[str, list[float]]) -> str:
    if not times:
        return "<p>No service times recorded.</p>"
    return (
        f'<p class="muted">Run ms ({escape(RUN_TIME_NOTE)}).</p><div class="charts">'
        + "".join(f"<div>{histogram_svg(v, title=k)}</div>" for k, v in times.items())
        + "</div>"
    )


def _episodes_page(store: RunStore | None) -> str:
    if store is None:
        return "<h1>Episodes</h1><p>This service keeps no run store.</p>"
    rows = store.episodes(limit=200)
    if not rows:
        return "<h1>Episodes</h1><p>No agent episodes recorded yet.</p>"
    body = []
    for r in rows:
        if r["finished"] is None:
            verdict = "unfinished"
        elif not r["has_verdict"]:
            verdict = f"No verdict ({escape(str(r['error_type']))})"
        else:
            verdict = f"{r['score']:.3f}"
        body.append(
            f'<tr><td><a href="/console/episodes/{quote(r["id"])}">{escape(r["id"])}</a></td>'
            f"<td>{escape(r['env_name'])}</td><td>{utc_time(r['created'])}</td>"
            f'<td class="num">{r["steps"]}</td><td>{verdict}</td></tr>'
        )
    head = "<tr><th>Episode</th><th>Environment</th><th>Started</th>"
    head += '<th class="num">Steps</th><th>Verdict</th></tr>'
    return f"<h1>Episodes</h1><table>{head}{''.join(body)}</table>"


def _episode_page(store: RunStore, episode_id: str) -> str:
    """One episode, replayed step by step (each step links to the one before and after it),
    then the work dir's diff and the verdict."""
    ep = store.episode(episode_id)
    steps = ep["steps"]
    n = len(steps)
    parts = [
        f"<h1>Episode {escape(episode_id)}</h1>",
        f'<p class="muted">{escape(ep["env_name"])} · sandbox {escape(str(ep["sandbox_id"]))}'
        f" · started {utc_time(ep['created'])} · {n} steps · "
        f'<a href="#step-1">replay from the first step</a></p>',
    ]
    for i, step in enumerate(steps, 1):
        action = step["action"]
        what = action.get("command") or action.get("path") or ""
        nav = " · ".join(
            x
            for x in (
                f'<a href="#step-{i - 1}">previous</a>' if i > 1 else "",
                f'<a href="#step-{i + 1}">next</a>' if i < n else '<a href="#result">result</a>',
            )
            if x
        )
        out = step.get("output")
        detail = ""
        if out is not None:
            flag = " · timed out" if step.get("timed_out") else ""
            detail = (
                f'<p class="muted">exit {step.get("exit_code")} · '
                f"{step['duration_s'] * 1000:.0f} ms{flag} · stdout {out['stdout_bytes']} bytes,"
                f" stderr {out['stderr_bytes']} bytes</p>"
                f"<pre>{escape(out['stdout'])}</pre>"
                + (f"<pre>{escape(out['stderr'])}</pre>" if out["stderr"] else "")
            )
        parts.append(
            f'<section id="step-{i}"><h2>Step {i} of {n}: {escape(action["tool"])}</h2>'
            f"<p><code>{escape(what)}</code></p>{detail}<p>{nav}</p></section>"
        )
    parts.append(f'<h2 id="result">The work dir\'s diff</h2><pre>{escape(ep["diff"])}</pre>')
    result = ep["result"]
    if result is None:
        parts.append("<h2>Verdict</h2><p>unfinished</p>")
    else:
        r = RunResult.model_validate(result)
        verdict = f"{r.score:.3f}" if r.has_verdict else f"No verdict ({r.error_type})"
        cause = f"<p>{_cause(r)}</p>" if _cause(r) else ""
        parts.append(f"<h2>Verdict</h2><p>{escape(verdict)}</p>{cause}{_cases_html(r)}")
    return "".join(parts)


def _run_page(store: RunStore, run_id: str, page: int) -> str:
    info = store.run(run_id)
    results = store.results(run_id)
    items = store.inputs(run_id)
    t = info.totals
    lo = page * PAGE_ROWS
    shown = range(lo, min(lo + PAGE_ROWS, info.total))
    rows = []
    for i in shown:
        r = results.get(i)
        env = items[i][0] if i < len(items) else "-"
        if r is None:
            rows.append(
                f'<tr data-index="{i}"><td class="num">{i}</td><td>{escape(env)}</td>'
                '<td class="muted">not recorded</td><td>—</td><td></td><td></td><td></td></tr>'
            )
            continue
        verdict, score = _verdict_cell(r)
        rows.append(
            f'<tr data-index="{i}"><td class="num">{i}</td><td>{escape(r.env_name or env)}</td>'
            f'<td>{verdict}</td><td class="num">{score}</td><td>{_cases_html(r)}</td>'
            f"<td>{_cause(r)}</td>"
            f'<td class="num">{r.service.run_ms:.1f}</td></tr>'
        )
    pager = ""
    if info.total > PAGE_ROWS:
        pages = (info.total + PAGE_ROWS - 1) // PAGE_ROWS
        pager = "<p>Page: " + " ".join(
            f"<b>{p + 1}</b>"
            if p == page
            else f'<a href="/console/runs/{escape(run_id)}?page={p}">{p + 1}</a>'
            for p in range(pages)
        )
        pager += "</p>"
    return (
        f'<h1>Run <span id="run-id">{escape(info.id)}</span></h1>'
        f'<p class="muted">{escape(info.kind)} of {escape(info.source)} · started '
        f"{utc_time(info.created)} · {escape(_status(info))}</p>"
        f"{_totals_html(t)}{_no_verdict_html(results)}"
        f"<h2>Service time by environment</h2>{_charts(store.run_times(run_id))}"
        f"<h2>Results</h2>{pager}"
        '<table id="results"><tr><th class="num">#</th><th>Environment</th><th>Verdict</th>'
        '<th class="num">Score</th><th>Tests</th><th>Cause</th>'
        f'<th class="num" title="{escape(RUN_TIME_NOTE)}">{RUN_TIME_LABEL}</th>'
        f"</tr>{''.join(rows)}</table>{pager}"
    )


# ---------------------------------------------------------------------------------------------
# Routes and access
# ---------------------------------------------------------------------------------------------


def _unauthorized() -> HTMLResponse:
    return _page(
        "Sign in",
        "<h1>Console token needed</h1><p>Open the console with the address printed when it "
        "was launched (it ends in <code>?token=...</code>).</p>",
        status=401,
    )


def _navigates(request: Request) -> bool:
    """A browser opening the page (its Fetch Metadata says so): it gets a redirect without the
    token, which leaves its address bar; any other client gets the page at the token's URL."""
    return request.headers.get("sec-fetch-dest") == "document"


def _store_page(
    store: RunStore | None, what: str, key: str, body: Callable[[RunStore], str]
) -> Response:
    """The page of the stored ``what`` ("Run", "Episode", "QA report") ``key``; a 404 without
    a store or without that one."""
    if store is None:
        return _page(what, "<h1>No run store</h1>", status=404)
    try:
        return _page(f"{what} {key}", body(store))
    except ConfigError as exc:  # no such run, episode or report
        noun = what if what[:2].isupper() else what.lower()  # "QA report" keeps its capitals
        return _page(what, f"<h1>No such {noun}</h1><p>{escape(str(exc))}</p>", 404)


def add_console(app: FastAPI, store: RunStore | None, token: str) -> None:
    """Serve the console under ``/console``, behind ``token``."""

    def signed(response: Response) -> Response:
        response.set_cookie(
            COOKIE, token, httponly=True, samesite="strict", path="/console", max_age=86400
        )
        return response

    def serve(request: Request, page: Callable[[], Response]) -> Response:
        """``page()`` to a right cookie, or to the right token (``?token=``) with the cookie
        set; a browser bringing the token is sent to the page's address without it; a 401
        otherwise."""
        given = request.query_params.get("token")
        if given is not None:
            if not secrets.compare_digest(given.encode(), token.encode()):
                return _unauthorized()
            if not _navigates(request):  # curl, a script: the page itself
                return signed(page())
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            query = urlencode(rest)
            target = request.url.path + (f"?{query}" if query else "")
            return signed(RedirectResponse(target, status_code=303))
        cookie = request.cookies.get(COOKIE, "")
        if cookie and secrets.compare_digest(cookie.encode(), token.encode()):
            return page()
        return _unauthorized()

    @app.get("/console", response_class=HTMLResponse)
    async def runs(request: Request) -> Response:
        return serve(request, lambda: _page("Runs", _runs_page(store)))

    @app.get("/console/runs/{run_id}", response_class=HTMLResponse)
    async def run(request: Request, run_id: str, page: int = 0) -> Response:
        return serve(
            request,
            lambda: _store_page(store, "Run", run_id, lambda s: _run_page(s, run_id, max(page, 0))),
        )

    @app.get("/console/episodes", response_class=HTMLResponse)
    async def episodes(request: Request) -> Response:
        return serve(request, lambda: _page("Episodes", _episodes_page(store)))

    @app.get("/console/episodes/{episode_id}", response_class=HTMLResponse)
    async def episode(request: Request, episode_id: str) -> Response:
        return serve(
            request,
            lambda: _store_page(
                store, "Episode", episode_id, lambda s: _episode_page(s, episode_id)
            ),
        )

    @app.get("/console/qa", response_class=HTMLResponse)
    async def qa_reports(request: Request) -> Response:
        return serve(request, lambda: _page("QA reports", qa_list_page(store)))

    @app.get("/console/qa/{report_id}", response_class=HTMLResponse)
    async def qa_report(request: Request, report_id: str) -> Response:
        return serve(
            request,
            lambda: _store_page(store, "QA report", report_id, lambda s: qa_page(s, report_id)),
        )

    @app.get("/console/environments", response_class=HTMLResponse)
    async def environments(request: Request) -> Response:
        def body() -> Response:
            times: dict[str, Any] = store.run_times() if store is not None else {}
            return _page(
                "Environments",
                "<h1>Service time by environment</h1>"
                '<p class="muted">The latest results of every stored run.</p>' + _charts(times),
            )

        return serve(request, body)
