"""Small inline SVG charts for self-contained HTML reports (no JavaScript, no CDN, no fonts).

Each function returns one `<svg>` element as text; every label is HTML-escaped
(`workbench.reports.textsafe.html_text`), so data (rule ids, reason codes) can never inject markup.
"""

from __future__ import annotations

from workbench.reports.textsafe import html_text

__all__ = ["grouped_bars", "heatmap", "paired_series"]

_FONT = 'font-family="system-ui, sans-serif" font-size="12"'
BEFORE, AFTER = "#8a9bb0", "#2f6fb3"


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {_FONT} {extra}>{html_text(text)}</text>'


def heatmap(rows: list[str], cols: list[str], values: dict[tuple[str, str], int], title: str,
            row_label: str = "from", col_label: str = "to") -> str:
    """A labelled grid; darker cells hold larger counts."""
    cell, left, top = 72, 90, 50
    peak = max(values.values(), default=0) or 1
    width, height = left + cell * len(cols) + 20, top + cell * len(rows) + 20
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
              f'aria-label="{html_text(title)}">'), _text(4, 16, title, extra='font-weight="bold"'),
             _text(left + cell * len(cols) / 2, 34, f"{col_label} →", "middle")]
    for j, col in enumerate(cols):
        parts.append(_text(left + cell * j + cell / 2, top - 4, col, "middle"))
    for i, row in enumerate(rows):
        parts.append(_text(left - 8, top + cell * i + cell / 2 + 4, f"{row_label} {row}", "end"))
        for j, col in enumerate(cols):
            value = values.get((row, col), 0)
            shade = 0.08 + 0.85 * (value / peak) if value else 0.0
            fill = f"rgba(47,111,179,{shade:.3f})" if value else "#f4f6f8"
            x, y = left + cell * j, top + cell * i
            parts.append(f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" stroke="#d0d7de"/>')
            color = "#fff" if shade > 0.55 else "#111"
            parts.append(_text(x + cell / 2, y + cell / 2 + 4, f"{value:,}", "middle", f'fill="{color}"'))
    parts.append("</svg>")
    return "".join(parts)


def grouped_bars(items: list[tuple[str, int, int]], title: str, labels: tuple[str, str] = ("history", "draft")) -> str:
    """Horizontal bars: for each label a pair (before, after)."""
    bar, gap, left, width = 10, 8, 220, 360
    peak = max([max(b, a) for _, b, a in items], default=0) or 1
    height = 40 + len(items) * (2 * bar + gap) + 10
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" role="img" '
              f'aria-label="{html_text(title)}">'), _text(4, 16, title, extra='font-weight="bold"'),
             f'<rect x="{left}" y="24" width="10" height="10" fill="{BEFORE}"/>', _text(left + 14, 33, labels[0]),
             f'<rect x="{left + 90}" y="24" width="10" height="10" fill="{AFTER}"/>', _text(left + 104, 33, labels[1])]
    y = 42
    for label, before, after in items:
        parts.append(_text(left - 8, y + bar + 4, label, "end"))
        for value, color, offset in ((before, BEFORE, 0), (after, AFTER, bar)):
            length = width * value / peak
            parts.append(f'<rect x="{left}" y="{y + offset}" width="{length:.1f}" height="{bar - 1}" fill="{color}"/>')
            parts.append(_text(left + length + 4, y + offset + bar - 1, f"{value:,}", extra='font-size="10"'))
        y += 2 * bar + gap
    parts.append("</svg>")
    return "".join(parts)


def paired_series(points: list[tuple[str, int, int]], title: str, labels: tuple[str, str] = ("history", "draft")) -> str:
    """Vertical paired bars over an ordered axis (e.g. months)."""
    left, top, plot_h = 50, 40, 160
    step = max(18, min(48, 640 // max(len(points), 1)))
    peak = max([max(b, a) for _, b, a in points], default=0) or 1
    width = left + step * len(points) + 20
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{max(width, 320)}" height="{top + plot_h + 50}" '
              f'role="img" aria-label="{html_text(title)}">'), _text(4, 16, title, extra='font-weight="bold"'),
             f'<rect x="{left}" y="22" width="10" height="10" fill="{BEFORE}"/>', _text(left + 14, 31, labels[0]),
             f'<rect x="{left + 90}" y="22" width="10" height="10" fill="{AFTER}"/>', _text(left + 104, 31, labels[1]),
             _text(left - 6, top + 8, f"{peak:,}", "end", 'font-size="10"'), _text(left - 6, top + plot_h, "0", "end", 'font-size="10"'),
             f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" stroke="#999"/>']
    half = (step - 4) / 2
    for index, (label, before, after) in enumerate(points):
        x = left + step * index + 2
        for value, color, offset in ((before, BEFORE, 0), (after, AFTER, half)):
            h = plot_h * value / peak
            parts.append(f'<rect x="{x + offset:.1f}" y="{top + plot_h - h:.1f}" width="{half:.1f}" height="{h:.1f}" '
                         f'fill="{color}"><title>{html_text(label)}: {value:,}</title></rect>')
        parts.append(_text(x + step / 2, top + plot_h + 14, label, "end",
                           f'font-size="10" transform="rotate(-45 {x + step / 2:.1f} {top + plot_h + 14:.1f})"'))
    parts.append("</svg>")
    return "".join(parts)
