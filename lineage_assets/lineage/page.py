"""The lineage page: one self-contained HTML file (inline SVG, no network) of the OpenLineage graph.

Jobs and datasets in layers from sources to sinks; each job coloured by its latest run's state;
the Spark jobs an asset run started are listed inside the asset's job; column edges appear on
demand (the "column lineage" switch, or a click on a column to follow it up and down).
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from lineage_assets.lineage.graph import LineageGraph, Node

COLUMN_WIDTH = 380
DATASET_WIDTH = 270
JOB_WIDTH = 250
NESTED_NAME_CHARS = 24  # what fits beside the state in a job box
TITLE_CHAR_WIDTH = 7.8  # of the 13 px monospace titles: a job box is as wide as its name
ROW = 18
HEADER = 40
GAP = 28
MARGIN = 30
HEADER_BAR = 90  # the page's header above the drawing (it wraps on narrow pages)
NESTED_SHOWN = 6  # Spark jobs listed inside an asset's job; the rest are counted


@dataclass
class Box:
    """A node of the picture: a dataset or a top-level job, with its place."""

    id: str
    kind: str  # "dataset" or "job"
    title: str
    subtitle: str
    rows: list[tuple[str, str]]  # dataset: (column, type); job: (nested job, state)
    state: str = ""
    tooltip: str = ""
    layer: int = 0
    x: float = 0
    y: float = 0
    predecessors: list[str] = field(default_factory=list)

    @property
    def width(self) -> int:
        if self.kind == "dataset":
            return DATASET_WIDTH
        return max(JOB_WIDTH, round(20 + TITLE_CHAR_WIDTH * len(self.title)))

    @property
    def height(self) -> int:
        return HEADER + ROW * len(self.rows) + 8

    def row_y(self, index: int) -> float:
        return self.y + HEADER + ROW * index + ROW / 2


def dataset_id(node: Node) -> str:
    return f"dataset:{node[0]}:{node[1]}"


def _boxes(graph: LineageGraph, labels: dict[Node, str]) -> tuple[dict[str, Box], list[tuple[str, str, bool]]]:
    """Boxes and edges (source id, target id, seen only in nested Spark jobs)."""
    top = sorted(job for job in graph.jobs if graph.datasets_of(job) and graph.owner_of(job) is None)
    nested: dict[str, list[str]] = defaultdict(list)
    for job in graph.jobs:
        if owner := graph.owner_of(job):
            nested[owner].append(job)
    edges: dict[tuple[str, str], bool] = {}
    datasets: dict[str, Node] = {}
    for job in top:
        for members, only_nested in (([job], False), (nested[job], True)):
            for member in members:
                for node in graph.inputs.get(member, ()):
                    if only_nested and node in graph.outputs.get(job, ()):
                        continue  # a Spark action reading back what the job wrote: not an upstream
                    edges.setdefault((dataset_id(node), job), only_nested)
                    datasets[dataset_id(node)] = node
                for node in graph.outputs.get(member, ()):
                    edges.setdefault((job, dataset_id(node)), only_nested)
                    datasets[dataset_id(node)] = node
    boxes: dict[str, Box] = {}
    for job in top:
        summary = graph.jobs[job]
        rows = [(_nested_name(graph.jobs[n].short_name), graph.jobs[n].state) for n in sorted(nested[job])]
        if len(rows) > NESTED_SHOWN:
            rows = rows[: NESTED_SHOWN - 1] + [(f"… {len(rows) - NESTED_SHOWN + 1} more Spark jobs", "")]
        kind = " ".join(filter(None, (summary.processing_type, summary.integration, summary.job_type)))
        tooltip_lines = [
            f"job {job}",
            f"latest run {summary.latest_run}: {summary.state}",
            f"{len(summary.runs)} runs",
            *([f"parent job {summary.parent}"] if summary.parent else []),
            *(f"Spark job {graph.jobs[n].short_name}: {graph.jobs[n].state}" for n in sorted(nested[job])),
        ]
        boxes[job] = Box(job, "job", summary.short_name, kind, rows, summary.state, "\n".join(tooltip_lines))
    aliases = defaultdict(list)
    for (namespace, name, kind), nodes in graph.aliases.items():
        for node in nodes:
            aliases[node].append(f"{kind} {namespace}:{name}")
    for box_id, node in sorted(datasets.items()):
        tooltip = "\n".join([f"dataset {node[0]}:{node[1]}", *(f"symlink {a}" for a in sorted(aliases[node]))])
        boxes[box_id] = Box(
            box_id,
            "dataset",
            labels.get(node, node[1]),
            f"{node[0]}  {node[1]}",
            list(graph.columns(node, set(top)).items()),
            tooltip=tooltip,
        )
    for source, target in edges:
        boxes[target].predecessors.append(source)
    return boxes, [(source, target, only_nested) for (source, target), only_nested in sorted(edges.items())]


def _nested_name(name: str) -> str:
    """A Spark job's name without its application prefix, cut to fit (the tooltip has it whole)."""
    action = name.split(".", 1)[-1]
    return action if len(action) <= NESTED_NAME_CHARS else action[: NESTED_NAME_CHARS - 1] + "…"


def _layout(boxes: dict[str, Box]) -> tuple[float, float]:
    """Longest-path layers left to right; within a layer, order by the predecessors' mean height."""

    def layer(box_id: str, visiting: frozenset[str] = frozenset()) -> int:
        box = boxes[box_id]
        earlier = [layer(p, visiting | {box_id}) + 1 for p in box.predecessors if p not in visiting]
        box.layer = max(earlier, default=0)
        return box.layer

    for box_id in boxes:
        layer(box_id)
    columns: dict[int, list[Box]] = defaultdict(list)
    for box in sorted(boxes.values(), key=lambda b: (b.kind, b.title)):
        columns[box.layer].append(box)
    height = 0.0
    for index in sorted(columns):
        column = columns[index]
        if index:
            column.sort(key=lambda b: sum(boxes[p].y for p in b.predecessors) / max(len(b.predecessors), 1))
        y = MARGIN + 20
        for box in column:
            box.x, box.y = MARGIN + index * COLUMN_WIDTH + (DATASET_WIDTH - box.width) / 2, y
            y += box.height + GAP
        height = max(height, y)
    return MARGIN * 2 + max(columns) * COLUMN_WIDTH + DATASET_WIDTH, height + MARGIN


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    bend = max((x2 - x1) / 2, 40)
    return f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"


def _box_svg(box: Box) -> str:
    e = html.escape
    state_class = f" state-{box.state.lower()}" if box.state else ""
    parts = [
        f'<g class="box {box.kind}{state_class}" data-id="{e(box.id)}">',
        f"<title>{e(box.tooltip)}</title>",
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.width}" height="{box.height}" rx="6"/>',
        f'<text class="title" x="{box.x + 10:.1f}" y="{box.y + 17:.1f}">{e(box.title)}</text>',
        f'<text class="subtitle" x="{box.x + 10:.1f}" y="{box.y + 31:.1f}">{e(box.subtitle)}</text>',
    ]
    if box.state:
        parts.append(
            f'<text class="state" x="{box.x + box.width - 10:.1f}" y="{box.y + 31:.1f}" '
            f'text-anchor="end">{e(box.state)}</text>'
        )
    for index, (name, detail) in enumerate(box.rows):
        y = box.row_y(index)
        key = f"{box.id}|{name}"
        row_class = "column" if box.kind == "dataset" else f"nested state-{detail.lower()}"
        parts.append(
            f'<g class="{row_class}" data-key="{e(key)}">'
            f'<rect x="{box.x + 4:.1f}" y="{y - ROW / 2:.1f}" width="{box.width - 8}" height="{ROW}"/>'
            f'<text x="{box.x + 10:.1f}" y="{y + 4:.1f}">{e(name)}</text>'
            f'<text class="type" x="{box.x + box.width - 10:.1f}" y="{y + 4:.1f}" text-anchor="end">'
            f"{e(detail)}</text></g>"
        )
    parts.append("</g>")
    return "".join(parts)


@dataclass(frozen=True)
class LineagePage:
    html: str
    width: int  # of the drawing, in CSS pixels
    height: int

    def write(self, path: Path, png: Path | None = None) -> None:
        """The HTML page, and if asked a PNG of it with the column edges shown (needs Chromium)."""
        path.write_text(self.html)
        if png is not None:
            screenshot(path, png, self.width + 2 * MARGIN, self.height + HEADER_BAR)


def render(graph: LineageGraph, labels: dict[Node, str], title: str, source: str) -> LineagePage:
    """The page; ``labels`` names datasets (asset keys) in place of their paths."""
    boxes, edges = _boxes(graph, labels)
    if not boxes:
        width, height = 600.0, 120.0
    else:
        width, height = _layout(boxes)
    svg = []
    for source_id, target_id, only_nested in edges:
        source_box, target_box = boxes[source_id], boxes[target_id]
        path = _curve(
            source_box.x + source_box.width, source_box.y + HEADER / 2, target_box.x, target_box.y + HEADER / 2
        )
        css = "edge nested-only" if only_nested else "edge"
        svg.append(
            f'<path class="{css}" d="{path}" marker-end="url(#arrow)"><title>{html.escape(source_id)} → '
            f"{html.escape(target_id)}{' (reported only by Spark)' if only_nested else ''}</title></path>"
        )
    column_links = []
    for source_node, source_column, target_node, target_column in sorted(graph.column_edges):
        from_box, to_box = boxes.get(dataset_id(source_node)), boxes.get(dataset_id(target_node))
        if not from_box or not to_box:
            continue
        rows = [name for name, _ in from_box.rows], [name for name, _ in to_box.rows]
        if source_column not in rows[0] or target_column not in rows[1]:
            continue
        start = (from_box.x + from_box.width, from_box.row_y(rows[0].index(source_column)))
        end = (to_box.x, to_box.row_y(rows[1].index(target_column)))
        from_key, to_key = f"{from_box.id}|{source_column}", f"{to_box.id}|{target_column}"
        column_links.append([from_key, to_key])
        svg.append(
            f'<path class="column-edge" data-from="{html.escape(from_key)}" data-to="{html.escape(to_key)}" '
            f'd="{_curve(*start, *end)}"/>'
        )
    svg.extend(_box_svg(box) for box in boxes.values())
    counts = (
        f"{sum(b.kind == 'job' for b in boxes.values())} jobs, {sum(b.kind == 'dataset' for b in boxes.values())} "
        f"datasets, {len(column_links)} column edges"
    )
    page = _TEMPLATE.format(
        title=html.escape(title),
        source=html.escape(source),
        counts=counts,
        width=f"{width:.0f}",
        height=f"{height:.0f}",
        svg="\n".join(svg),
        links=json.dumps(column_links).replace("</", "<\\/"),
    )
    return LineagePage(page, round(width), round(height))


def screenshot(page: Path, png: Path, width: int, height: int) -> None:
    """Render a page with its column edges shown to a PNG, with a headless Chromium."""
    browser = next(
        (path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None
    )
    if browser is None:
        raise RuntimeError(
            f"no Chromium found on PATH to render {png} (Debian: apt-get install chromium); "
            f"the HTML page {page} is written"
        )
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--window-size={width},{height}",
            f"--screenshot={png.resolve()}",
            f"{page.resolve().as_uri()}#columns",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 13px system-ui, sans-serif; margin: 0; color: #1d2733; background: #f7f8fa; }}
header {{ padding: 10px 30px; background: #fff; border-bottom: 1px solid #dde1e6; display: flex; gap: 24px;
  align-items: baseline; flex-wrap: wrap; }}
header h1 {{ font-size: 17px; margin: 0; }}
.legend span {{ display: inline-block; padding: 1px 8px; border-radius: 9px; margin-right: 4px; }}
svg text {{ font: 12px ui-monospace, monospace; fill: #1d2733; }}
svg text.title {{ font-weight: 600; font-size: 13px; }}
svg text.subtitle, svg text.type {{ fill: #66707c; font-size: 10.5px; }}
.box > rect {{ stroke: #9aa4b1; stroke-width: 1.2; }}
.dataset > rect {{ fill: #fff; }}
.job > rect {{ fill: #eef1f5; }}
.state-complete > rect, .legend .complete {{ fill: #dcf3e3; background: #dcf3e3; }}
.state-running > rect, .legend .running {{ fill: #dbe9fb; background: #dbe9fb; }}
.state-fail > rect, .legend .fail {{ fill: #fbdcdc; background: #fbdcdc; }}
.state-abort > rect, .legend .abort {{ fill: #fbe9d3; background: #fbe9d3; }}
.nested > rect {{ fill: transparent; stroke: none; }}
.column > rect {{ fill: transparent; stroke: none; cursor: pointer; }}
.column:hover > rect {{ fill: #f0f3f7; }}
.column.highlight > rect {{ fill: #fff1b8; }}
.edge {{ fill: none; stroke: #7d8896; stroke-width: 1.6; }}
.edge.nested-only {{ stroke-dasharray: 5 4; stroke: #b3541e; }}
.column-edge {{ fill: none; stroke: #3b7dd8; stroke-width: 1.1; opacity: 0.55; display: none; }}
body.columns .column-edge {{ display: inline; }}
.column-edge.highlight {{ display: inline; stroke: #d4a000; stroke-width: 2.2; opacity: 1; }}
</style></head>
<body>
<header><h1>{title}</h1><span>{counts}</span><span>from {source}</span>
<label><input type="checkbox" id="columns-switch"> column lineage</label>
<span class="legend">latest run: <span class="complete">COMPLETE</span><span class="running">RUNNING</span><span
 class="fail">FAIL</span><span class="abort">ABORT</span></span>
<span>click a column to follow it upstream and downstream</span></header>
<svg xmlns="http://www.w3.org/2000/svg" id="graph" width="{width}" height="{height}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
<path d="M0,0 L10,5 L0,10 z" fill="#7d8896"/></marker></defs>
{svg}
</svg>
<script>
const links = {links};
const switcher = document.getElementById("columns-switch");
switcher.addEventListener("change", () => document.body.classList.toggle("columns", switcher.checked));
if (location.hash === "#columns") {{ switcher.checked = true; document.body.classList.add("columns"); }}
function reach(start, from, to) {{
  const found = new Set([start]); let frontier = [start];
  while (frontier.length) {{
    const next = [];
    for (const link of links) if (frontier.includes(link[from]) && !found.has(link[to])) {{
      found.add(link[to]);
      next.push(link[to]);
    }}
    frontier = next;
  }}
  return found;
}}
let selected = null;
for (const column of document.querySelectorAll(".column")) {{
  column.addEventListener("click", () => {{
    const key = column.dataset.key;
    selected = selected === key ? null : key;
    const up = selected ? reach(key, 1, 0) : new Set(), down = selected ? reach(key, 0, 1) : new Set();
    const on = (a, b) => (up.has(a) && up.has(b)) || (down.has(a) && down.has(b));
    for (const row of document.querySelectorAll(".column"))
      row.classList.toggle("highlight", up.has(row.dataset.key) || down.has(row.dataset.key));
    for (const edge of document.querySelectorAll(".column-edge"))
      edge.classList.toggle("highlight", on(edge.dataset.from, edge.dataset.to));
  }});
}}
</script>
</body></html>
"""
