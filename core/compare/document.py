"""A tiny document model rendered to Markdown and to self-contained HTML.

The report is built once as blocks (headings, paragraphs, tables, images,
lists, preformatted text); both renderers format the same blocks, so the
Markdown and HTML reports cannot disagree.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from tprimat.compare.stats import Aggregate, Ratio


@attrs.frozen
class Heading:
    level: int
    text: str


@attrs.frozen
class Paragraph:
    text: str


@attrs.frozen
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]


@attrs.frozen
class Image:
    file: str  # relative to the report directory
    alt: str


@attrs.frozen
class Bullets:
    items: Sequence[str]


@attrs.frozen
class Preformatted:
    text: str


@attrs.frozen
class Markdown:
    """Markdown written by another module (shown verbatim in HTML)."""

    text: str


Block = Heading | Paragraph | Table | Image | Bullets | Preformatted | Markdown


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}\n")
        elif isinstance(block, Paragraph):
            out.append(block.text + "\n")
        elif isinstance(block, Table):
            out.append("| " + " | ".join(_md_cell(h) for h in block.headers) + " |")
            out.append("|" + "|".join("---" for _ in block.headers) + "|")
            for row in block.rows:
                out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
            out.append("")
        elif isinstance(block, Image):
            out.append(f"![{block.alt}]({block.file})\n")
        elif isinstance(block, Bullets):
            out.extend(f"- {item}" for item in block.items)
            out.append("")
        elif isinstance(block, Preformatted):
            out.append("```\n" + block.text.rstrip("\n") + "\n```\n")
        elif isinstance(block, Markdown):
            out.append(block.text.rstrip("\n") + "\n")
    return "\n".join(out).rstrip("\n") + "\n"


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1200px; color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.8rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8rem 0 1.2rem; font-size: 0.92rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; border: 1px solid #eee; margin: 0.5rem 0 1rem; }
pre { background: #f7f7f7; padding: 0.8rem; overflow-x: auto; font-size: 0.85rem; }
code { background: #f3f3f3; padding: 0 0.2rem; }
"""


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("%", "").replace("×", "").replace("$", "").strip()
    try:
        float(stripped.split(" ")[0])
    except ValueError:
        return False
    return True


def _inline(text: str) -> str:
    """Escape, then turn `code` spans into <code> (the only inline markup the report uses)."""
    parts = html.escape(str(text)).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)).replace("\n", "<br>")


def to_html(blocks: Sequence[Block], *, title: str, base_dir: Path) -> str:
    """Self-contained HTML: images are embedded as base64 data URIs."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
    ]
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            out.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            out.append(
                "<table><thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in block.headers) + "</tr></thead><tbody>"
            )
            for row in block.rows:
                cells = "".join(  # the first column names the row: never a number
                    f'<td class="num">{_inline(c)}</td>' if i and _looks_numeric(str(c)) else f"<td>{_inline(c)}</td>"
                    for i, c in enumerate(row)
                )
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(block, Image):
            data = base64.b64encode((base_dir / block.file).read_bytes()).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}"></figure>')
        elif isinstance(block, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Preformatted | Markdown):
            out.append(f"<pre>{html.escape(block.text)}</pre>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


# --- numbers in tables: one spelling for every report ----------------------------------------

DASH = "–"


def format_number(value: float | None, spec: str, unit: str = "") -> str:
    """``value`` formatted by ``spec`` with ``unit``; a dash when there is none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH if value is None else str(value)
    return f"{value:{spec}}{unit}"


def format_median(agg: Aggregate | None, spec: str, unit: str = "") -> str:
    """An aggregate's median, marked when it is one run's figure."""
    if agg is None:
        return DASH
    text = format_number(agg.median, spec, unit)
    return text + (" (single run)" if agg.single_run else "")


def format_interval(agg: Aggregate | None, spec: str) -> str:
    """An aggregate's interval and what it is ("95% CI" or "range of 2 runs"), or why there is none."""
    if agg is None:
        return DASH
    if agg.ci_low is None or agg.ci_high is None:
        return "single run: no interval"
    return f"{agg.ci_low:{spec}} {DASH} {agg.ci_high:{spec}} ({agg.interval or 'bootstrap interval'})"


def format_ratio_interval(ratio: Ratio | None) -> str:
    """A ratio's interval and what it is, or why there is none."""
    if ratio is None:
        return DASH
    if ratio.ci_low is None or ratio.ci_high is None:
        return ratio.note or DASH
    return f"{ratio.ci_low:.3f} {DASH} {ratio.ci_high:.3f} ({ratio.interval or 'bootstrap interval'})"
