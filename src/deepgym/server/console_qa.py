"""The console's QA pages (``/console/qa`` and ``/console/qa/<id>``): the kept reports of
``deepgym qa`` and ``check``, as HTML bodies that ``deepgym.server.console`` serves behind its
token. Every piece of stored text (an environment's name, a check's message, a mutant's diff, a
killing input) is escaped: a report holds what a verifier and a mutant printed.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from deepgym.envs.qa.report import QaCheck, QaEntry, QaReport, check_group
from deepgym.server.svg import scores_svg
from deepgym.store import RunStore
from deepgym.text import utc_time

__all__ = ["DEFAULT_THRESHOLD", "qa_list_page", "qa_page"]

DEFAULT_THRESHOLD = 0.90
"""The mutation score line drawn when no environment of a report states its threshold."""


def _score(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _meta(report: QaReport) -> str:
    return " · ".join(f"{k} {v}" for k, v in sorted(report.meta.items()) if v is not None)


def qa_list_page(store: RunStore | None) -> str:
    """The body of ``/console/qa``: the kept reports, newest first, with their summaries."""
    if store is None:
        return "<h1>QA reports</h1><p>This service keeps no run store.</p>"
    reports = store.qa_reports(limit=200)
    if not reports:
        return (
            "<h1>QA reports</h1><p>No QA report kept yet: <code>deepgym qa</code> (or "
            "<code>deepgym check ENV</code>) keeps one.</p>"
        )
    head = (
        "<tr><th>Report</th><th>Saved</th><th>How</th><th class=num>Environments</th>"
        "<th class=num>Passed every check</th><th class=num>Mean mutation score</th>"
        "<th class=num>Lowest mutation score</th></tr>"
    )
    rows = []
    for r in reports:
        s = r.summary
        rows.append(
            f'<tr data-qa="{escape(r.id)}"><td><a href="/console/qa/{quote(r.id)}">'
            f"{escape(r.id)}</a></td><td>{utc_time(r.created)}</td><td>{escape(_meta(r))}</td>"
            f'<td class="num">{s.environments}</td><td class="num">{s.passed}/{s.environments}'
            f'</td><td class="num">{_score(s.mean_score)}</td>'
            f'<td class="num">{_score(s.min_score)}</td></tr>'
        )
    return (
        "<h1>QA reports</h1><p class=muted>Each <code>deepgym qa</code> and <code>check</code> "
        "keeps its report; the mutation scores are those of the environments it ran mutants "
        f'on.</p><table id="qa-reports">{head}{"".join(rows)}</table>'
    )


def _held(checks: list[QaCheck]) -> str:
    """``3/3 held`` (the failures in red), or ``-`` when there are none of that group."""
    if not checks:
        return '<span class="muted">-</span>'
    ok = sum(c.ok for c in checks)
    css = "pass" if ok == len(checks) else "fail"
    return f'<span class="{css}">{ok}/{len(checks)} held</span>'


def _qa_row(i: int, e: QaEntry) -> str:
    groups = {g: [c for c in e.checks if check_group(c.name) == g] for g in ("wrong", "probe")}
    failed = sum(not c.ok for c in e.checks)
    result = (
        '<span class="pass">ok</span>'
        if e.ok
        else f'<span class="fail">FAILED ({failed} of {len(e.checks)})</span>'
    )
    cells = [
        f'<a href="#env-{i}">{escape(e.env)}</a>',
        escape(e.kind or "-"),
        result,
        _held(groups["wrong"]),
        _held(groups["probe"]),
    ]
    m = e.mutation
    if m is None:
        nums = ['<td class="num muted">-</td>'] * 9
    else:
        css = "pass" if m.ok else "fail" if m.gated else "muted"
        nums = [
            f'<td class="num">{v}</td>'
            for v in (m.mutants, m.equivalent, m.killed, m.survived, m.undecided, m.no_verdict)
        ]
        nums += [
            f'<td class="num {css}">{_score(m.score)}</td>',
            f'<td class="num">{m.threshold:.2f}</td>',
            f'<td class="num">{m.seconds:.1f}</td>',
        ]
    return (
        f'<tr data-env="{escape(e.env)}">'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "".join(nums)
        + "</tr>"
    )


_GROUP_TITLES = (
    ("reference", "The reference"),
    ("wrong", "Wrong answers (must score nothing)"),
    ("probe", "Exploit probes (must be judged a failure)"),
)


def _qa_checks(e: QaEntry) -> str:
    out = []
    for group, title in _GROUP_TITLES:
        checks = [c for c in e.checks if check_group(c.name) == group]
        if not checks:
            continue
        rows = "".join(
            f"<tr><td>{escape(c.name)}</td><td>"
            + ('<span class="pass">ok</span>' if c.ok else '<span class="fail">FAILED</span>')
            + f"</td><td>{escape(c.message)}</td></tr>"
            for c in checks
        )
        out.append(
            f"<h3>{escape(title)}</h3><table><tr><th>Check</th><th>Result</th><th>Detail</th>"
            f"</tr>{rows}</table>"
        )
    return "".join(out)


def _qa_mutation(e: QaEntry) -> str:
    m = e.mutation
    if m is None:
        return '<p class="muted">No mutation testing in this report.</p>'
    verdict = (
        '<span class="pass">ok</span>'
        if m.ok
        else '<span class="fail">below</span>'
        if m.gated
        else "below, reported as it is"
    )
    parts = [
        f"<h3>Mutation testing</h3><p>{m.mutants} mutants: {m.killed} killed, {m.survived} "
        f"survived, {m.undecided} undecided (counted as survivors), {m.equivalent} likely "
        f"equivalent (left out), {m.no_verdict} without a verdict. Score "
        f"<b>{_score(m.score)}</b> against {m.threshold:.2f}: {verdict} ({m.seconds:.1f} s).</p>"
    ]
    for s in m.survivors:
        found = (
            f"<p>An input that kills it: <code>{escape(s.killing_input)}</code> (add it as a "
            "test case)</p>"
            if s.killing_input is not None
            else '<p class="muted">No input that tells it from the reference was found.</p>'
        )
        parts.append(
            f'<div class="survivor"><h4>Survivor {escape(s.id)}: {escape(s.operator)}, line '
            f"{s.line}: {escape(s.description)}</h4><pre>{escape(s.diff)}</pre>{found}</div>"
        )
    for u in m.undecideds:
        parts.append(
            f'<div class="undecided"><h4>Undecided {escape(u.id)}: {escape(u.operator)}, line '
            f"{u.line}: {escape(u.description)}</h4><pre>{escape(u.diff)}</pre>"
            f"<p>{escape(u.why)}</p></div>"
        )
    if m.equivalents:
        items = "".join(
            f"<li>{escape(q.id)}: {escape(q.operator)}, line {q.line}: {escape(q.description)}"
            f" ({escape(q.why)})<pre>{escape(q.diff)}</pre></li>"
            for q in m.equivalents
        )
        parts.append(
            f"<details><summary>{len(m.equivalents)} likely equivalent "
            f"mutant{'s' if len(m.equivalents) != 1 else ''}, left out of the score</summary>"
            f"<ul>{items}</ul></details>"
        )
    return "".join(parts)


def qa_page(store: RunStore, report_id: str) -> str:
    """The body of ``/console/qa/<id>``; ``ConfigError`` when the store has no such report."""
    report = store.qa_report(report_id)
    entries = report.entries or []
    s = report.summary
    mutated = [e for e in entries if e.mutation is not None]
    chart = ""
    if mutated:
        threshold = next(
            (e.mutation.threshold for e in mutated if e.mutation is not None), DEFAULT_THRESHOLD
        )
        chart = "<h2>Mutation scores</h2>" + scores_svg(
            [(e.env, e.mutation.score if e.mutation else None) for e in mutated],
            threshold=threshold,
        )
    head = (
        "<tr><th>Environment</th><th>Kind</th><th>Checks</th><th>Wrong answers</th>"
        "<th>Probes</th>"
        + "".join(
            f'<th class="num">{h}</th>'
            for h in (
                "Mutants",
                "Equivalent",
                "Killed",
                "Survived",
                "Undecided",
                "No verdict",
                "Score",
                "Threshold",
                "Seconds",
            )
        )
        + "</tr>"
    )
    sections = "".join(
        f'<section id="env-{i}"><h2>{escape(e.env)} ({escape(e.kind or "-")})</h2>'
        f"{_qa_checks(e)}{_qa_mutation(e)}</section>"
        for i, e in enumerate(entries)
    )
    return (
        f'<h1>QA report <span id="qa-id">{escape(report.id)}</span></h1>'
        f'<p class="muted">{escape(_meta(report))} · saved {utc_time(report.created)} · '
        f'<span id="qa-passed">{s.passed}/{s.environments}</span> environments passed every '
        f"check · mean mutation score {_score(s.mean_score)}, lowest {_score(s.min_score)}</p>"
        f'{chart}<h2>Environments</h2><table id="qa-envs">{head}'
        f"{''.join(_qa_row(i, e) for i, e in enumerate(entries))}</table>{sections}"
    )
