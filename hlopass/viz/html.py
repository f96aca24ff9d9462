"""A self-contained HTML page of a `Graph`: opens from disk, needs no network.

The Graphviz SVG (hlopass.viz.svg: `dot`, or its WebAssembly build) is inlined with a
small script: wheel to zoom, drag to pan, a search box that finds an instruction by name
(Enter cycles through matches and centres on them) and a side panel that shows the clicked
instruction's HLO text, metadata and estimated cost. The page states how many nodes it
drew (`data-nodes` on <body>, for tests and tools).
"""

from __future__ import annotations

import html
import json

from hlopass.viz.dot import to_dot
from hlopass.viz.graph import Graph
from hlopass.viz.svg import render_svg

_STYLE = """
body { margin: 0; font-family: Helvetica, Arial, sans-serif; display: flex; height: 100vh; }
#view { flex: 1; overflow: hidden; position: relative; background: #fff; cursor: grab; }
#view svg { position: absolute; left: 0; top: 0; transform-origin: 0 0; }
#side { width: 360px; border-left: 1px solid #ccc; padding: 10px; overflow: auto;
        font-size: 13px; background: #fafafa; }
#side pre { white-space: pre-wrap; word-break: break-all; font-size: 12px; background: #fff;
            border: 1px solid #ddd; padding: 6px; }
#search { width: 100%; box-sizing: border-box; padding: 6px; font-size: 14px; }
.hit polygon, .hit path, .hit ellipse { stroke: #d81b60 !important; stroke-width: 4px !important; }
.note { color: #666; font-size: 12px; }
"""

_SCRIPT = """
const data = JSON.parse(document.getElementById('hlo-data').textContent);
const view = document.getElementById('view');
const svg = view.querySelector('svg');
let scale = 1, tx = 0, ty = 0, drag = null;
function apply() { svg.style.transform = `translate(${tx}px,${ty}px) scale(${scale})`; }
function fit() {
  const w = svg.viewBox.baseVal.width || svg.getBBox().width;
  const h = svg.viewBox.baseVal.height || svg.getBBox().height;
  svg.setAttribute('width', w); svg.setAttribute('height', h);
  scale = Math.min(view.clientWidth / w, view.clientHeight / h, 1.5); tx = 0; ty = 0; apply();
}
view.addEventListener('wheel', e => {
  e.preventDefault();
  const r = view.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
  const f = e.deltaY < 0 ? 1.15 : 1 / 1.15;
  tx = x - (x - tx) * f; ty = y - (y - ty) * f; scale *= f; apply();
}, {passive: false});
view.addEventListener('mousedown', e => { drag = [e.clientX - tx, e.clientY - ty]; });
window.addEventListener('mouseup', () => { drag = null; });
window.addEventListener('mousemove', e => {
  if (drag) { tx = e.clientX - drag[0]; ty = e.clientY - drag[1]; apply(); }
});
function show(id) {
  const n = data.nodes[id]; if (!n) return;
  const esc = s => (s || '').replace(/[&<>]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  let h = `<h3>${esc(n.name)}</h3><div>${esc(n.opcode)} &middot; ${esc(n.shape)}</div>`;
  h += `<pre>${esc(n.text)}</pre>`;
  if (n.op_name) h += `<div><b>op_name</b> ${esc(n.op_name)}</div>`;
  if (n.source) h += `<div><b>source</b> ${esc(n.source)}</div>`;
  if (n.notes && n.notes.length) h += `<h4>why</h4><ul>` + n.notes.map(x => `<li>${esc(x)}</li>`).join('') + '</ul>';
  if (n.cost) {
    const c = n.cost;
    h += `<h4>estimated on ${esc(data.device)}</h4><table>` +
      ['time_us','compute_us','memory_us','launch_us','flops','bytes_accessed','bound']
        .map(k => `<tr><td>${k}</td><td>${typeof c[k] === 'number' ? c[k].toPrecision(4) : esc(c[k])}</td></tr>`)
        .join('') + '</table>';
  }
  document.getElementById('detail').innerHTML = h;
}
function centre(el) {
  const b = el.getBBox(), cx = b.x + b.width / 2, cy = b.y + b.height / 2;
  const m = el.getCTM(), svgm = svg.getCTM();
  const p = svg.createSVGPoint(); p.x = cx; p.y = cy;
  const q = p.matrixTransform(svgm.inverse().multiply(m));
  scale = Math.max(scale, 1); tx = view.clientWidth / 2 - q.x * scale; ty = view.clientHeight / 2 - q.y * scale;
  apply();
}
svg.querySelectorAll('g.node').forEach(g => g.addEventListener('click', e => {
  e.stopPropagation(); show(g.id);
}));
let hits = [], at = -1;
document.getElementById('search').addEventListener('keydown', e => {
  if (e.key !== 'Enter') return;
  const q = e.target.value.trim().toLowerCase();
  svg.querySelectorAll('.hit').forEach(x => x.classList.remove('hit'));
  hits = Object.keys(data.nodes).filter(id => data.nodes[id].name.toLowerCase().includes(q));
  document.getElementById('count').textContent = q ? `${hits.length} match(es)` : '';
  if (!hits.length) return;
  at = (at + 1) % hits.length;
  hits.forEach(id => { const el = document.getElementById(id); if (el) el.classList.add('hit'); });
  const el = document.getElementById(hits[at]); if (el) { centre(el); show(hits[at]); }
});
window.addEventListener('resize', fit);
fit();
"""


def to_html(g: Graph, marks: dict[str, str] | None = None, title: str | None = None) -> str:
    """The page (HloError when no Graphviz can lay it out: see hlopass.viz.svg)."""
    dot = to_dot(g, marks)
    svg = render_svg(dot)
    svg = svg[svg.find("<svg") :]
    ids = {nid: f"n{i}" for i, nid in enumerate(g.nodes)}
    payload = {
        "device": g.device,
        "nodes": {
            ids[nid]: {
                "name": n.name,
                "opcode": n.opcode,
                "shape": n.shape,
                "text": n.text,
                "op_name": n.op_name,
                "source": n.source,
                "cost": n.cost,
                "notes": n.notes,
            }
            for nid, n in g.nodes.items()
        },  # fmt: skip
    }
    blob = json.dumps(payload).replace("</", "<\\/")  # never closes the script element
    title = title or g.name
    notes = "".join(f'<p class="note">{html.escape(o)}</p>' for o in g.omitted)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)} · hlopass</title>
<style>{_STYLE}</style></head>
<body data-nodes="{len(g.nodes)}">
<div id="view">{svg}</div>
<div id="side"><input id="search" placeholder="find an instruction by name (Enter)">
<div id="count" class="note"></div>
<h2>{html.escape(title)}</h2><p class="note">{len(g.nodes)} instructions drawn{
        f", device {html.escape(g.device)}" if g.device else ""
    }. Wheel: zoom; drag: pan;
click a node for its HLO and cost.</p>{notes}<div id="detail"></div></div>
<script type="application/json" id="hlo-data">{blob}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
