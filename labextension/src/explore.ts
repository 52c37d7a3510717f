/**
 * Saved diffs (application/vnd.agio.diff+json) and run trees (application/vnd.agio.tree+json) as DOM.
 *
 * Same rules as the transcript: untrusted text only goes through textContent; classes and layout follow
 * the Python package's HTML fallbacks (agio_notebook/explore/diff.py and tree.py).
 */
import { classToken, el } from './dom';
import { magicButton, shortArg } from './magic';

export const DIFF_MIME_TYPE = 'application/vnd.agio.diff+json';
export const TREE_MIME_TYPE = 'application/vnd.agio.tree+json';

export function formatCost(cost: unknown): string {
  if (typeof cost !== 'number' || Number.isNaN(cost)) {
    return 'unknown';
  }
  if (cost === 0) {
    return '$0';
  }
  return cost < 1 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

function num(v: unknown, unit = ''): string {
  return typeof v === 'number' ? `${Math.round(v)}${unit}` : '–';
}

function signed(v: unknown, unit = ''): string {
  if (typeof v !== 'number') {
    return '–';
  }
  return `${v > 0 ? '+' : ''}${Math.round(v)}${unit}`;
}

function parse(data: unknown, what: string): Record<string, any> {
  const value = typeof data === 'string' ? JSON.parse(data) : data;
  if (!value || typeof value !== 'object' || typeof (value as any).version !== 'number' || (value as any).version > 1) {
    throw new Error(`unsupported ${what}`);
  }
  return value as Record<string, any>;
}

function renderOps(doc: Document, ops: [string, string][]): HTMLElement {
  const node = el(doc, 'div', ['agio-text']);
  for (const [op, text] of ops ?? []) {
    node.append(op === 'equal' ? doc.createTextNode(text) : el(doc, 'span', [`agio-diff-${classToken(op)}`], text));
  }
  return node;
}

function renderSide(doc: Document, info: Record<string, any> | null, ops: [string, string][]): HTMLElement {
  const cell = el(doc, 'td', ['agio-diff-cell']);
  if (!info) {
    cell.append(el(doc, 'span', ['agio-label'], '—'));
    return cell;
  }
  let head = `#${info.sequence} ${info.role} · ${num(info.tokens)} tokens · ${num(info.latency_ms, ' ms')}`;
  if (info.role === 'assistant') {
    head += ` · ${formatCost(info.cost)}`;
  }
  cell.append(el(doc, 'div', ['agio-label'], head));
  if (ops && ops.length) {
    cell.append(renderOps(doc, ops));
  }
  for (const call of info.tool_calls ?? []) {
    cell.append(el(doc, 'div', ['agio-diff-call'], `calls ${call.name}(${call.arguments ?? ''})`));
  }
  if (info.tool) {
    const t = info.tool;
    cell.append(el(doc, 'div', ['agio-diff-call'], `tool ${t.name} → ${t.error ? 'error: ' + t.error : t.result ?? ''}`));
  }
  return cell;
}

/** One difference of setup, short: a system prompt is named (the header shows it word by word). */
function setupLine(c: Record<string, any>): string {
  return c.name === 'system prompt' ? 'system prompt differs' : `${c.name}: ${JSON.stringify(c.a)} → ${JSON.stringify(c.b)}`;
}

/** Where the two sides' setups first differ (system prompt word by word, model, settings, tools). */
function renderSetup(doc: Document, changes: Record<string, any>[]): HTMLElement | null {
  if (!changes.length) {
    return null;
  }
  const node = el(doc, 'div', ['agio-diff-setup']);
  for (const c of changes) {
    if (c.name === 'system prompt') {
      const line = el(doc, 'div', [], 'system prompt: A ');
      line.append(renderOps(doc, c.text_a), ' · B ', renderOps(doc, c.text_b));
      node.append(line);
    } else {
      node.append(el(doc, 'div', [], setupLine(c)));
    }
  }
  return node;
}

/** The side-by-side diff table. */
export function renderDiff(data: unknown, doc: Document): HTMLElement {
  const root = el(doc, 'div', ['agio-diff']);
  try {
    const d = parse(data, 'diff');
    const rows: Record<string, any>[] = d.rows ?? [];
    const changed = rows.filter(r => r.status !== 'same').length;
    const head = el(doc, 'div', ['agio-header']);
    head.append(el(doc, 'b', [], 'agio diff'), ' ', el(doc, 'span', ['agio-diff-summary'],
      `${changed} of ${rows.length} step pairs differ · tokens ${d.a.tokens} → ${d.b.tokens} (${signed(d.delta.tokens)}) · ` +
      `cost ${formatCost(d.a.cost)} → ${formatCost(d.b.cost)}`));
    root.append(head);
    const setup = renderSetup(doc, d.setup ?? []);
    if (setup) {
      root.append(setup);
    }
    const table = el(doc, 'table', ['agio-diff-table']);
    const tr = el(doc, 'tr');
    tr.append(el(doc, 'th', [], `A: ${d.a.label}`), el(doc, 'th', [], `B: ${d.b.label}`));
    table.append(tr);
    for (const r of rows) {
      const row = el(doc, 'tr', ['agio-diff-row', `agio-diff-${classToken(r.status)}`]);
      const right = renderSide(doc, r.b, r.text_b);
      const changes: string[] = (r.arguments ?? []).map(
        (c: any) => `${c.tool}.${c.name}: ${JSON.stringify(c.a)} → ${JSON.stringify(c.b)}`);
      changes.push(...(r.setup ?? []).map(setupLine));
      if (r.result_changed) {
        changes.push('tool result differs');
      }
      if (r.tokens_delta) {
        changes.push(`${signed(r.tokens_delta)} tokens`);
      }
      if (r.latency_delta_ms) {
        changes.push(signed(r.latency_delta_ms, ' ms'));
      }
      if (changes.length) {
        right.append(el(doc, 'div', ['agio-diff-changes'], changes.join(' · ')));
      }
      row.append(renderSide(doc, r.a, r.text_a), right);
      table.append(row);
    }
    root.append(table);
  } catch (e) {
    root.classList.add('agio-invalid');
    root.textContent = `Cannot show this agio diff: ${(e as Error).message}`;
  }
  return root;
}

function bar(doc: Document, value: unknown, top: number, kind: string): HTMLElement {
  const node = el(doc, 'span', ['agio-tree-bar', `agio-tree-bar-${kind}`]);
  const width = typeof value === 'number' && value > 0 ? Math.max(2, (80 * value) / (top || 1)) : 0;
  node.style.width = `${Math.round(width)}px`;
  node.title = kind;
  return node;
}

function renderTreeNode(doc: Document, node: Record<string, any>, scale: Record<string, number>): HTMLElement {
  const li = el(doc, 'li');
  if (node.kind === 'session') {
    li.classList.add('agio-tree-session');
    if (node.forked_from) {
      li.append(el(doc, 'div', ['agio-tree-fork'], `fork ${String(node.id).slice(0, 8)} at step ${node.forked_at}`));
    }
  } else {
    li.classList.add('agio-tree-run');
    if (node.current) {
      li.classList.add('agio-tree-current-run');
    }
    li.dataset.run = String(node.id);
    const details = el(doc, 'details') as HTMLDetailsElement;
    const summary = el(doc, 'summary');
    let title = `${node.run_kind} ${String(node.id).slice(0, 8)}`;
    if (node.attempt > 1) {
      title += ` · attempt ${node.attempt}`;
    }
    summary.append(el(doc, 'b', [], title), ' ', el(doc, 'span', ['agio-status', `agio-status-${classToken(node.status)}`], node.status), ' ');
    summary.append(node.current ? el(doc, 'span', ['agio-tree-current'], '★ current') : el(doc, 'span', ['agio-label'], 'superseded'));
    summary.append(el(doc, 'span', ['agio-label'], ` ${node.model ?? ''} · ${node.query ?? ''}`), el(doc, 'br'));
    const timeline = el(doc, 'span', ['agio-timeline']);
    const phases: Record<string, any>[] = node.timeline ?? [];
    const total = phases.reduce((s, p) => s + (p.ms || 0), 0) || 1;
    for (const p of phases) {
      const ph = el(doc, 'span', ['agio-phase', `agio-phase-${classToken(p.kind)}`]);
      ph.style.width = `${Math.round(Math.max(2, (160 * (p.ms || 0)) / total))}px`;
      ph.title = `${p.label} · ${Math.round(p.ms || 0)} ms`;
      timeline.append(ph);
    }
    summary.append(timeline, ' ', bar(doc, node.tokens, scale.tokens, 'tokens'),
      el(doc, 'span', ['agio-label'], `${node.tokens ?? 0} tokens `), bar(doc, node.latency_ms, scale.latency_ms, 'latency'),
      el(doc, 'span', ['agio-label'], `${num(node.latency_ms, ' ms')} · ${formatCost(node.cost)}`));
    details.append(summary);
    const transcript = el(doc, 'div', ['agio-tree-transcript']);
    for (const e of node.transcript ?? []) {
      const step = el(doc, 'div', ['agio-tree-step', `agio-step-${classToken(e.role)}`]);
      const who = e.role === 'user' ? 'You' : e.role === 'assistant' ? 'Assistant' : `tool ${e.name ?? ''}`;
      step.append(el(doc, 'span', ['agio-label'], `#${e.sequence} ${who} `), el(doc, 'span', ['agio-text'], e.text ?? ''));
      for (const c of e.calls ?? []) {
        step.append(el(doc, 'div', ['agio-diff-call'], `calls ${c}`));
      }
      transcript.append(step);
    }
    details.append(transcript);
    // with a kernel: open the run's full transcript, or make this attempt current, in a new cell
    const runId = shortArg(node.id);
    if (runId) {
      const bar = el(doc, 'div', ['agio-controls', 'agio-tree-controls']);
      bar.append(magicButton(doc, 'Open transcript', () => `%agio replay ${runId}`, ['agio-tree-open']));
      if (!node.current && Number.isInteger(node.attempt) && node.start_sequence != null) {
        bar.append(magicButton(doc, 'Use this attempt', () => `%agio use-attempt ${runId} ${node.attempt}`,
          ['agio-tree-use-attempt']));
      }
      details.append(bar);
    }
    li.append(details);
  }
  const children: Record<string, any>[] = node.children ?? [];
  if (children.length) {
    const ul = el(doc, 'ul', ['agio-tree-children']);
    for (const c of children) {
      ul.append(renderTreeNode(doc, c, scale));
    }
    li.append(ul);
  }
  return li;
}

/** What the colours mean: the timeline's phases, then the two bars (the Python view says the same). */
function treeLegend(doc: Document): HTMLElement {
  const legend = el(doc, 'div', ['agio-tree-legend', 'agio-label']);
  const keys: [string, string][] = [['model', 'model'], ['tool', 'tool'], ['approval', 'waiting for approval'],
    ['error', 'error'], ['tokens', 'tokens'], ['latency', 'latency']];
  legend.append('timeline: ');
  keys.forEach(([cls, label], i) => {
    if (i === 4) {
      legend.append(' · bars: ');
    }
    legend.append(el(doc, 'span', ['agio-legend-swatch', `agio-legend-${cls}`]), ` ${label} `);
  });
  return legend;
}

/** The run tree: nested lists, each run a <details> whose body is its transcript. */
export function renderTree(data: unknown, doc: Document): HTMLElement {
  const root = el(doc, 'div', ['agio-tree']);
  try {
    const d = parse(data, 'run tree');
    const head = el(doc, 'div', ['agio-header']);
    head.append(el(doc, 'b', [], 'agio tree'), ' ',
      el(doc, 'span', ['agio-label'], `session ${String(d.session_id).slice(0, 8)} · click a run for its transcript`));
    root.append(head, treeLegend(doc));
    const ul = el(doc, 'ul', ['agio-tree-children', 'agio-tree-top']);
    ul.append(renderTreeNode(doc, d.root, d.scale ?? {}));
    root.append(ul);
  } catch (e) {
    root.classList.add('agio-invalid');
    root.textContent = `Cannot show this agio tree: ${(e as Error).message}`;
  }
  return root;
}
