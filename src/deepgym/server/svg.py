"""Charts as inline SVG, drawn on the server (pure: no I/O, no scripts): service-time
histograms, and the mutation scores of a QA report against their threshold.

Bins are log-spaced when the times span more than a factor of 4 (service times are heavy-tailed),
linear otherwise; the p50 and p99 are marked. Every piece of text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["bin_edges", "histogram_svg", "quantile", "scores_svg"]

MAX_BINS = 24


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of already sorted values (the one ``BatchResult`` uses)."""
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[idx])


def bin_edges(lo: float, hi: float, n: int) -> list[float]:
    """``n + 1`` edges from ``lo`` to ``hi``: log-spaced over a wide range, linear otherwise."""
    lo = max(lo, 0.0)
    if hi <= lo:
        hi = lo + 1.0
    if lo > 0 and hi / lo > 4:
        a, b = math.log(lo), math.log(hi)
        return [math.exp(a + (b - a) * i / n) for i in range(n + 1)]
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def _fmt_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"


def histogram_svg(values_ms: Sequence[float], *, title: str, width: int = 420) -> str:
    """An ``<svg>`` histogram of ``values_ms`` (milliseconds) with p50 and p99 marked."""
    height, pad_l, pad_r, pad_t, pad_b = 150, 34, 10, 22, 34
    label = escape(title)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="service time, {label}">'
        f'<text x="{pad_l}" y="14" font-size="12" font-weight="bold">{label}</text>'
    )
    xs = sorted(float(v) for v in values_ms if math.isfinite(v) and v >= 0)
    if not xs:
        return head + f'<text x="{pad_l}" y="70" font-size="12">no runs</text></svg>'
    n_bins = max(1, min(MAX_BINS, math.ceil(math.sqrt(len(xs)))))
    edges = bin_edges(xs[0], xs[-1], n_bins)
    counts = [0] * n_bins
    for v in xs:
        i = n_bins - 1
        for j in range(n_bins):
            if v < edges[j + 1]:
                i = j
                break
        counts[i] += 1
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    top = max(counts)
    bar_w = plot_w / n_bins
    parts = [head]
    for i, c in enumerate(counts):
        h = plot_h * c / top
        x = pad_l + i * bar_w
        y = pad_t + plot_h - h
        tip = f"{_fmt_ms(edges[i])} to {_fmt_ms(edges[i + 1])}: {c} run{'s' if c != 1 else ''}"
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="#4a78b5"><title>{escape(tip)}</title></rect>'
        )

    def x_of(ms: float) -> float:
        lo, hi = edges[0], edges[-1]
        if lo > 0 and hi / lo > 4:
            frac = (math.log(max(ms, lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))
        else:
            frac = (ms - lo) / (hi - lo)
        return pad_l + plot_w * min(max(frac, 0.0), 1.0)

    base = pad_t + plot_h
    parts.append(
        f'<line x1="{pad_l}" y1="{base}" x2="{pad_l + plot_w}" y2="{base}" stroke="#333"/>'
        f'<text x="{pad_l}" y="{base + 14}" font-size="11">{_fmt_ms(edges[0])}</text>'
        f'<text x="{pad_l + plot_w}" y="{base + 14}" font-size="11" text-anchor="end">'
        f"{_fmt_ms(edges[-1])}</text>"
        f'<text x="4" y="{pad_t + 10}" font-size="11">{top}</text>'
    )
    for name, q, color in (("p50", 0.5, "#2a7d2a"), ("p99", 0.99, "#b03030")):
        v = quantile(xs, q)
        x = x_of(v)
        parts.append(
            f'<line x1="{x:.1f}" y1="{pad_t}" x2="{x:.1f}" y2="{base}" stroke="{color}" '
            f'stroke-dasharray="3,2"><title>{name} {_fmt_ms(v)}</title></line>'
        )
    p50, p99 = quantile(xs, 0.5), quantile(xs, 0.99)
    parts.append(
        f'<text x="{pad_l}" y="{height - 4}" font-size="11">{len(xs)} runs, '
        f"p50 {_fmt_ms(p50)}, p99 {_fmt_ms(p99)}</text></svg>"
    )
    return "".join(parts)


def scores_svg(
    scores: Sequence[tuple[str, float | None]], *, threshold: float, width: int = 640
) -> str:
    """A horizontal bar per ``(name, score)`` (a score in [0, 1]; ``None``: no score) with the
    ``threshold`` as a dashed line: a bar below it is red, one at or above it green."""
    row, pad_l, pad_r, pad_t, pad_b = 16, 200, 48, 22, 22
    height = pad_t + pad_b + row * max(len(scores), 1)
    plot_w = width - pad_l - pad_r
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="mutation scores">'
        f'<text x="4" y="14" font-size="12" font-weight="bold">Mutation score '
        f"(threshold {threshold:.2f})</text>"
    ]
    if not scores:
        parts.append(f'<text x="{pad_l}" y="{pad_t + 12}" font-size="12">no environments</text>')
    for i, (name, score) in enumerate(scores):
        y = pad_t + i * row
        label = escape(name if len(name) <= 30 else name[:29] + "\u2026")
        parts.append(
            f'<text x="{pad_l - 6}" y="{y + 12}" font-size="11" text-anchor="end">{label}</text>'
        )
        if score is None or not math.isfinite(score):
            parts.append(
                f'<text x="{pad_l + 4}" y="{y + 12}" font-size="11" fill="#666">no score</text>'
            )
            continue
        frac = min(max(score, 0.0), 1.0)
        color = "#2a7d2a" if score >= threshold else "#b03030"
        parts.append(
            f'<rect x="{pad_l}" y="{y + 2}" width="{max(plot_w * frac, 1):.1f}" height="{row - 4}" '
            f'fill="{color}"><title>{escape(name)}: {score:.3f}</title></rect>'
            f'<text x="{pad_l + plot_w * frac + 4:.1f}" y="{y + 12}" font-size="11">'
            f"{score:.2f}</text>"
        )
    x = pad_l + plot_w * min(max(threshold, 0.0), 1.0)
    base = height - pad_b
    parts.append(
        f'<line x1="{x:.1f}" y1="{pad_t}" x2="{x:.1f}" y2="{base}" stroke="#333" '
        f'stroke-dasharray="4,3"><title>threshold {threshold:.2f}</title></line>'
        f'<line x1="{pad_l}" y1="{base}" x2="{pad_l + plot_w}" y2="{base}" stroke="#333"/>'
        f'<text x="{pad_l}" y="{base + 14}" font-size="11">0</text>'
        f'<text x="{pad_l + plot_w}" y="{base + 14}" font-size="11" text-anchor="end">1</text>'
        "</svg>"
    )
    return "".join(parts)
