/**
 * A graph Graphviz laid out (agio_notebook/views/graph.py), drawn as SVG elements built in the DOM.
 *
 * Untrusted notebooks show no SVG outputs, so the Python side sends positions instead and this draws
 * them. Labels reach the page through textContent only; coordinates are checked to be numbers.
 */

const SVG_NS = 'http://www.w3.org/2000/svg';

export interface LaidNode {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface LaidEdge {
  tail: string;
  head: string;
  points: [number, number][];
  arrow: [number, number] | null;
}

/** A box around a group of nodes (a nested run's steps), with its label at the top: x, y its top left. */
export interface LaidCluster {
  label: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface GraphLayout {
  width: number;
  height: number;
  nodes: Record<string, LaidNode>;
  edges: LaidEdge[];
  clusters?: LaidCluster[];
}

/** How one node looks: its label lines, colours and classes. */
export interface NodeLook {
  lines: string[];
  fill: string;
  stroke: string;
  dashed?: boolean;
  classes?: string[];
  title?: string;
}

function svg<K extends keyof SVGElementTagNameMap>(doc: Document, tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const node = doc.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, String(v));
  }
  return node;
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isPoint = (p: unknown): p is [number, number] => Array.isArray(p) && finite(p[0]) && finite(p[1]);

/** A layout from a bundle, or null when it is missing or malformed (the caller shows a list instead). */
export function parseLayout(value: unknown): GraphLayout | null {
  const v = value as GraphLayout;
  if (!v || typeof v !== 'object' || !finite(v.width) || !finite(v.height) || !v.nodes || !Array.isArray(v.edges)) {
    return null;
  }
  for (const n of Object.values(v.nodes)) {
    if (!n || ![n.x, n.y, n.w, n.h].every(finite)) {
      return null;
    }
  }
  const clusters = (Array.isArray(v.clusters) ? v.clusters : [])
    .filter(c => c && [c.x, c.y, c.w, c.h].every(finite));
  return { ...v, clusters };
}

const PAD = 4;

/** The drawing: a box per node (rounded, coloured by `look`), a curve with an arrowhead per edge. */
export function drawGraph(doc: Document, layout: GraphLayout, look: (name: string) => NodeLook, label: string): SVGSVGElement {
  const root = svg(doc, 'svg', {
    width: Math.ceil(layout.width + 2 * PAD), height: Math.ceil(layout.height + 2 * PAD),
    viewBox: `${-PAD} ${-PAD} ${layout.width + 2 * PAD} ${layout.height + 2 * PAD}`, role: 'img'
  });
  root.classList.add('agio-graph');
  root.setAttribute('aria-label', label);
  for (const c of layout.clusters ?? []) { // behind the nodes and edges: a dashed box named at its top
    const g = svg(doc, 'g');
    g.classList.add('agio-graph-cluster');
    g.append(svg(doc, 'rect', { x: c.x, y: c.y, width: c.w, height: c.h, rx: 8, fill: 'none', stroke: '#8250df',
      'stroke-dasharray': '4 3' }));
    const name = svg(doc, 'text', { x: c.x + c.w / 2, y: c.y + 12, 'text-anchor': 'middle', 'font-size': 10,
      fill: '#8250df' });
    name.textContent = String(c.label ?? '');
    g.append(name);
    root.append(g);
  }
  for (const edge of layout.edges) {
    const points = (edge.points ?? []).filter(isPoint);
    if (points.length < 2) {
      continue;
    }
    let d = `M${points[0][0]},${points[0][1]}`;
    for (let i = 1; i + 2 < points.length; i += 3) {
      d += ` C${points[i][0]},${points[i][1]} ${points[i + 1][0]},${points[i + 1][1]} ${points[i + 2][0]},${points[i + 2][1]}`;
    }
    const g = svg(doc, 'g');
    g.classList.add('agio-graph-edge');
    g.append(svg(doc, 'path', { d, fill: 'none', stroke: '#8c959f', 'stroke-width': 1 }));
    const tip = edge.arrow;
    if (isPoint(tip)) {
      const [bx, by] = points[points.length - 1];
      const [dx, dy] = [tip[0] - bx, tip[1] - by];
      const len = Math.hypot(dx, dy) || 1;
      const [px, py] = [(-dy / len) * 3.5, (dx / len) * 3.5];
      g.append(svg(doc, 'polygon', {
        points: `${tip[0]},${tip[1]} ${bx + px},${by + py} ${bx - px},${by - py}`, fill: '#8c959f'
      }));
    }
    root.append(g);
  }
  for (const [name, n] of Object.entries(layout.nodes)) {
    const style = look(name);
    const g = svg(doc, 'g');
    g.classList.add('agio-graph-node', ...(style.classes ?? []));
    if (style.title) {
      const title = svg(doc, 'title');
      title.textContent = style.title;
      g.append(title);
    }
    const rect = svg(doc, 'rect', {
      x: n.x - n.w / 2, y: n.y - n.h / 2, width: n.w, height: n.h, rx: 6, fill: style.fill, stroke: style.stroke
    });
    if (style.dashed) {
      rect.setAttribute('stroke-dasharray', '4 3');
    }
    const text = svg(doc, 'text', { x: n.x, 'text-anchor': 'middle', 'font-size': 10, fill: '#1f2328' });
    const lineHeight = 12;
    const top = n.y - ((style.lines.length - 1) * lineHeight) / 2 + 3.5;
    style.lines.forEach((line, i) => {
      const span = svg(doc, 'tspan', { x: n.x, y: top + i * lineHeight });
      span.textContent = line;
      text.append(span);
    });
    g.append(rect, text);
    root.append(g);
  }
  return root;
}
