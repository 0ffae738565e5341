"""Pictures as inline SVG, drawn in Python from the passport's numbers: no plotting library, no script at view
time. Coordinates are written with a fixed number of decimals (``html.fixed``), so the same numbers always
give the same bytes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from heldout.site.html import esc, fixed

# Colour-blind-safe palette (Okabe & Ito), in a fixed order.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def _svg(width: int, height: int, label: str, body: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{esc(label)}"><title>{esc(label)}</title>{body}</svg>')


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def dimension_bars(task: str, scores: Sequence[tuple[str, Any]]) -> str:
    """Horizontal bars, one per dimension, score 0..100; a dimension not scored is drawn as a hatched gap."""
    row, left, width = 18, 130, 220
    height = row * len(scores) + 24
    parts = []
    for i, (name, raw) in enumerate(scores):
        y = 4 + i * row
        value = _num(raw)
        parts.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" font-size="11">{esc(name)}</text>')
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{width}" height="{row - 6}" fill="#eeeeee"/>')
        if value is None:
            parts.append(f'<text x="{left + 4}" y="{y + 12}" font-size="10" fill="#666666">not scored</text>')
            continue
        bar = max(0.0, min(100.0, value)) / 100 * width
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{fixed(bar)}" height="{row - 6}" fill="{PALETTE[0]}"/>')
        parts.append(f'<text x="{left + width + 4}" y="{y + 12}" font-size="10">{fixed(value)}</text>')
    axis_y = 4 + row * len(scores) + 12
    parts.append(f'<text x="{left}" y="{axis_y}" font-size="9" fill="#666666">0</text>')
    parts.append(f'<text x="{left + width}" y="{axis_y}" font-size="9" text-anchor="end" fill="#666666">100</text>')
    return _svg(left + width + 40, height, f"MedEval-1 dimension scores for {task}", "".join(parts))


def reliability_diagram(task: str, calibration: Mapping[str, Any] | None,
                        bins: Sequence[Mapping[str, Any]] | None = None) -> str:
    """Accuracy against confidence. With per-bin figures (``lo``, ``hi``, ``count``, ``confidence``,
    ``accuracy``: computed where the labels are public) one bar per bin; otherwise the overall mean confidence
    and accuracy the evaluation publishes, drawn as one point whose distance from the diagonal is the
    overconfidence."""
    size, pad = 200, 30
    span = size - 2 * pad
    parts = [f'<rect x="{pad}" y="{pad}" width="{span}" height="{span}" fill="#fafafa" stroke="#999999"/>',
             f'<line x1="{pad}" y1="{pad + span}" x2="{pad + span}" y2="{pad}" stroke="#999999" '
             'stroke-dasharray="3 3"/>',
             f'<text x="{pad + span / 2:.0f}" y="{size - 6}" font-size="10" text-anchor="middle">confidence</text>',
             f'<text x="10" y="{pad + span / 2:.0f}" font-size="10" text-anchor="middle" '
             f'transform="rotate(-90 10 {pad + span / 2:.0f})">accuracy</text>']

    def xy(conf: float, acc: float) -> tuple[str, str]:
        return fixed(pad + conf * span), fixed(pad + span - acc * span)

    cal = calibration or {}
    if bins:
        for b in bins:
            lo, hi, acc = _num(b.get("lo")), _num(b.get("hi")), _num(b.get("accuracy"))
            if lo is None or hi is None or acc is None or not b.get("count"):
                continue
            x, y = xy(lo, acc)
            w = fixed((hi - lo) * span)
            parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{fixed(acc * span)}" fill="{PALETTE[0]}" '
                         'fill-opacity="0.7"/>')
    else:
        conf, acc = _num(cal.get("mean_confidence")), _num(cal.get("accuracy"))
        if conf is not None and acc is not None:
            x, y = xy(max(0.0, min(1.0, conf)), max(0.0, min(1.0, acc)))
            dx, dy = xy(max(0.0, min(1.0, conf)), max(0.0, min(1.0, conf)))
            parts.append(f'<line x1="{x}" y1="{y}" x2="{dx}" y2="{dy}" stroke="{PALETTE[3]}"/>')
            parts.append(f'<circle cx="{x}" cy="{y}" r="4" fill="{PALETTE[0]}"/>')
        else:
            parts.append(f'<text x="{pad + 6}" y="{pad + 16}" font-size="10">not scored</text>')
    ece = _num(cal.get("ece"))
    parts.append(f'<text x="{pad}" y="{pad - 8}" font-size="10">ECE {fixed(ece, 3)}</text>')
    return _svg(size, size, f"reliability for {task}", "".join(parts))


def retention_lines(task: str, dimension: str, per_perturbation: Mapping[str, Any] | None) -> str:
    """Retention by severity (1..3) for each perturbation: one line each; a perturbation not scored (the
    clean model at chance) is drawn dashed and grey."""
    width, height, left, top, plot_w, plot_h = 360, 170, 36, 10, 180, 120
    items = sorted((per_perturbation or {}).items())
    top_value = 1.0
    for _, item in items:
        for v in (item or {}).get("retention_by_severity") or []:
            if _num(v) is not None:
                top_value = max(top_value, float(v))
    parts = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999999"/>',
             f'<text x="{left - 4}" y="{top + 8}" font-size="9" text-anchor="end">{fixed(top_value)}</text>',
             f'<text x="{left - 4}" y="{top + plot_h}" font-size="9" text-anchor="end">0</text>']
    severities = 3
    for s in range(severities):
        x = left + plot_w * s / (severities - 1)
        parts.append(f'<text x="{fixed(x)}" y="{top + plot_h + 12}" font-size="9" text-anchor="middle">'
                     f'severity {s + 1}</text>')
    for i, (name, item) in enumerate(items):
        values = [_num(v) for v in (item or {}).get("retention_by_severity") or []]
        points = [(left + plot_w * s / max(1, len(values) - 1), top + plot_h - (v / top_value) * plot_h)
                  for s, v in enumerate(values) if v is not None]
        scored = (item or {}).get("scored") is not False and "not_applicable" not in (item or {})
        colour = PALETTE[i % len(PALETTE)] if scored else "#999999"
        dash = "" if scored else ' stroke-dasharray="4 3"'
        if points:
            path = " ".join(f"{fixed(x)},{fixed(y)}" for x, y in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
        ly = top + 8 + i * 12
        parts.append(f'<line x1="{left + plot_w + 10}" y1="{ly - 3}" x2="{left + plot_w + 24}" y2="{ly - 3}" '
                     f'stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{left + plot_w + 28}" y="{ly}" font-size="9">{esc(name)}</text>')
    tall = max(height, top + 8 + len(items) * 12)
    return _svg(width, tall, f"{dimension} retention by severity for {task}", "".join(parts))
