/**
 * Pure rendering of an agio run transcript: JSON in, DOM out.
 *
 * Untrusted text (model output, tool arguments and results) only ever reaches the DOM through
 * textContent or attribute values, never innerHTML. The structure and class names follow the live
 * view and the static HTML fallback of the Python package.
 */

import { classToken, el } from './dom';
import { renderFeedback, renderMemoryCard, renderTrace } from './memory';
import { isSuperseded, renderControls } from './controls';
import { renderCardDebug, renderStepDebug } from './debugger';
import { Display, RunView, StepView, TERMINAL_STATUS, ToolCard, foldEvents, foldNested } from './fold';
import { icon } from './icons';
import { Transcript, parseTranscript } from './transcript';
import { counted, seconds } from './words';

export { foldEvents } from './fold';
export type { RunView, StepView, ToolCard } from './fold';
export { MIME_TYPE, parseTranscript } from './transcript';
export type { AgioEvent, Transcript } from './transcript';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const TABLE_TAGS = new Set(['table', 'thead', 'tbody', 'tfoot', 'tr', 'th', 'td', 'caption', 'div', 'span', 'br',
  'p', 'b', 'i']);

/** Copy only table markup and text from untrusted HTML (parsed inert, rebuilt element by element). */
function safeTable(doc: Document, html: string): HTMLElement {
  const parsed = new DOMParser().parseFromString(html, 'text/html');
  const copy = (from: Node, to: HTMLElement): void => {
    for (const child of Array.from(from.childNodes)) {
      if (child.nodeType === 3) {
        to.append(doc.createTextNode(child.textContent ?? ''));
      } else if (child.nodeType === 1) {
        const tag = (child as Element).tagName.toLowerCase();
        if (TABLE_TAGS.has(tag)) {
          const node = doc.createElement(tag);
          copy(child, node);
          to.append(node);
        } else if (tag !== 'script' && tag !== 'style') {
          copy(child, to);
        }
      }
    }
  };
  const box = el(doc, 'div', ['agio-display-html']);
  copy(parsed.body, box);
  return box;
}

function renderDisplays(doc: Document, displays: Display[]): HTMLElement {
  const box = el(doc, 'div', ['agio-displays']);
  for (const d of displays) {
    if (d.mime === 'image/png' && BASE64.test(d.data)) {
      const img = el(doc, 'img', ['agio-display-image']) as HTMLImageElement;
      img.alt = 'figure';
      img.src = `data:image/png;base64,${d.data}`;
      box.append(img);
    } else if (d.mime === 'text/html') {
      box.append(safeTable(doc, d.data));
    }
  }
  return box;
}

export function prettyJson(raw: string | undefined): string {
  if (raw === undefined || raw === null) {
    return '';
  }
  try {
    const parsed = JSON.parse(raw);
    // objects and lists are indented; scalars stay exactly as the tool wrote them ("2.0" stays "2.0")
    return parsed !== null && typeof parsed === 'object' ? JSON.stringify(parsed, null, 2) : String(raw);
  } catch {
    return String(raw);
  }
}

export function metricsLine(m: Record<string, any>, run = false): string {
  const parts: string[] = [];
  if (run) { // a step is any stored step; max_steps counts model calls, so both are said
    parts.push(`${counted(Number(m.steps) || 0, 'step')} (${counted(Number(m.model_calls) || 0, 'model call')})`);
    const outcomes = [[m.tool_errors, 'failed'], [m.tool_unfinished, 'not finished']].filter(([n]) => n)
      .map(([n, word]) => `${n} ${word}`);
    parts.push(counted(Number(m.tool_calls) || 0, 'tool call') + (outcomes.length ? ` (${outcomes.join(', ')})` : ''));
  }
  if (m.total_tokens !== undefined && m.total_tokens !== null) {
    let tokens = `${m.total_tokens} tokens`;
    if (m.prompt_tokens != null && m.completion_tokens != null) {
      tokens += ` (${m.prompt_tokens} in / ${m.completion_tokens} out)`;
    }
    parts.push(tokens);
  } else if (m.model_calls || m.model_ms != null) {
    parts.push('tokens unknown'); // the server sent no usage: unknown, not 0
  }
  if (m.ttft_ms != null) {
    parts.push(`TTFT ${Math.round(m.ttft_ms)} ms`);
  }
  if (m.model_ms) {
    parts.push(`model ${Math.round(m.model_ms)} ms`);
  }
  if (m.tool_ms) {
    parts.push(`tools ${Math.round(m.tool_ms)} ms`);
  }
  if (m.paused_ms) {
    parts.push(`paused ${seconds(m.paused_ms)}`); // step mode: its own figure, as the pause marks say it
  }
  if (m.duration_ms) {
    parts.push(`total ${Math.round(m.duration_ms)} ms`);
  }
  if ('cost' in m && (run || m.total_tokens != null)) {
    // unknown shows as unknown, never $0 (the same rule as agio_notebook.models.pricing.format_cost)
    const c = m.cost;
    parts.push(`cost ${typeof c !== 'number' ? 'unknown' : c === 0 ? '$0' : c < 1 ? '$' + c.toFixed(4) : '$' + c.toFixed(2)}`);
  }
  return parts.join(' · ');
}

function statusBadge(doc: Document, status: string): HTMLElement {
  return el(doc, 'span', ['agio-status', `agio-status-${classToken(status)}`], status);
}

function renderCard(doc: Document, card: ToolCard): HTMLElement {
  const details = el(doc, 'details', ['agio-tool-card', `agio-tool-${classToken(card.status)}`]) as HTMLDetailsElement;
  if (card.status !== 'ok') {
    details.open = true;
  }
  const summary = el(doc, 'summary');
  const kind = el(doc, 'span', ['agio-tool-label'], 'tool');
  kind.prepend(icon(doc, 'tool'));
  summary.append(kind, ' ', el(doc, 'span', ['agio-tool-name'], card.name), ' ', statusBadge(doc, card.status));
  if (card.durationMs !== undefined && card.durationMs !== null) {
    summary.append(el(doc, 'span', ['agio-tool-duration'], ` ${Math.round(card.durationMs)} ms`));
  }
  if (card.replayed) {
    summary.append(' · ', el(doc, 'span', ['agio-replayed'], 'replayed'));
  }
  if (card.isolation) {
    summary.append(el(doc, 'span', ['agio-isolation'], ` · sandbox: ${card.isolation}`));
  }
  details.append(summary);
  details.append(el(doc, 'div', ['agio-label'], 'arguments'));
  details.append(el(doc, 'pre', ['agio-tool-args'], prettyJson(card.arguments)));
  if (card.result !== undefined) {
    details.append(el(doc, 'div', ['agio-label'], 'result'));
    details.append(el(doc, 'pre', ['agio-tool-result'], prettyJson(card.result)));
  }
  if (card.diff) {
    details.append(el(doc, 'div', ['agio-label'], 'diff'));
    details.append(el(doc, 'pre', ['agio-tool-diff'], card.diff));
  }
  if (card.error !== undefined) {
    details.append(el(doc, 'pre', ['agio-tool-error'], `${card.errorType ?? 'error'}: ${card.error}`));
  }
  const nested = foldNested(card);
  if (nested) {
    details.open = true;
    details.append(renderNestedRun(doc, nested));
  }
  return details;
}

/** The run of an agent called as a tool, inside its card: its steps and cards, at any depth. */
function renderNestedRun(doc: Document, view: RunView): HTMLElement {
  const box = el(doc, 'details', ['agio-nested-run']) as HTMLDetailsElement;
  box.open = true;
  box.dataset.agioRun = String(view.run.id ?? '');
  const summary = el(doc, 'summary');
  summary.append('agent ', el(doc, 'b', ['agio-nested-agent'], String(view.run.agent_name ?? '?')), ' ',
    statusBadge(doc, String(view.run.status ?? 'running')), el(doc, 'span', ['agio-ids'], ` run ${short(view.run.id)}`));
  box.append(summary);
  for (const step of view.steps) {
    box.append(renderStep(doc, step, undefined, view.handoffs.length > 0));
  }
  if (view.run.error && view.run.status !== 'completed') {
    box.append(el(doc, 'div', ['agio-error'], String(view.run.error)));
  }
  box.append(el(doc, 'div', ['agio-metrics'], metricsLine(view.runMetrics, true)));
  return box;
}

/** A step; `agents`: the run was handed off, so each model step says which agent made it. */
function renderStep(doc: Document, step: StepView, t?: Transcript, agents = false): HTMLElement {
  const classes = ['agio-step', `agio-step-${classToken(step.role)}`];
  if (step.superseded) {
    classes.push('agio-superseded');
  }
  const partial = step.status === 'cancelled'; // stopped while it streamed: the text shown so far
  if (partial) {
    classes.push('agio-partial');
  }
  const node = el(doc, 'div', classes);
  node.dataset.sequence = String(step.sequence);
  const label = el(doc, 'div', ['agio-step-label']);
  const who = step.role === 'user' ? 'You' : step.role === 'memory' ? 'Memory'
    : 'Assistant' + (agents && step.agent ? ` (${step.agent})` : '');
  let head = `#${step.sequence} ${who}`;
  if (step.attempt > 1) {
    head += ` · attempt ${step.attempt}`;
  }
  if (step.superseded) {
    head += ' · superseded';
  }
  label.append(head);
  if (partial) {
    label.append(' · ', el(doc, 'span', ['agio-partial-note'], 'stopped: partial answer'));
  }
  const metrics = metricsLine(step.metrics);
  if (metrics) {
    label.title = metrics;
    if (step.role === 'assistant') {
      label.append(' · ', el(doc, 'span', ['agio-step-metrics'], metrics));
    }
  }
  node.append(label);
  if (step.text) {
    node.append(el(doc, 'div', ['agio-text'], step.text));
  }
  if (t) {
    node.append(...renderStepDebug(doc, t, step.sequence, step.role));
  }
  if (step.memory) {
    node.append(renderMemoryCard(doc, step.memory));
  }
  for (const card of step.cards) {
    node.append(renderCard(doc, card));
    if (t) {
      node.append(...renderCardDebug(doc, t, card.id));
    }
    if (card.displays.length) {
      node.append(renderDisplays(doc, card.displays));
    }
  }
  return node;
}

function short(id: unknown): string {
  return typeof id === 'string' ? id.slice(0, 8) : '';
}

/** The whole transcript as a DOM tree. */
export function renderRun(view: RunView, doc: Document): HTMLElement {
  const run = view.run;
  const root = el(doc, 'div', ['agio-run']);
  root.dataset.agioRun = String(run.id ?? '');
  const header = el(doc, 'div', ['agio-header']);
  const kind = String(run.kind ?? 'run');
  header.append(el(doc, 'b', [], `agio ${kind === 'run' ? 'Run' : kind.charAt(0).toUpperCase() + kind.slice(1)}`));
  header.append(' ', statusBadge(doc, String(run.status ?? 'unknown')));
  header.append(el(doc, 'span', ['agio-ids'], ` ${short(run.id)} · session ${short(run.session_id)}`));
  if (run.retry_of) {
    header.append(el(doc, 'span', ['agio-attempt'], ` · attempt ${run.attempt ?? '?'}, retry of ${short(run.retry_of)}`));
  }
  if (run.superseded_by) {
    header.append(el(doc, 'span', ['agio-attempt', 'agio-superseded'], ` · superseded by ${short(run.superseded_by)}`));
  } else if (isSuperseded(view.transcript, run)) {
    header.append(el(doc, 'span', ['agio-attempt', 'agio-superseded'], ' · superseded'));
  }
  root.append(header);
  if (view.handoffs.length) {
    const chain = [view.handoffs[0].from, ...view.handoffs.map(h => h.to)].join(' → ');
    root.append(el(doc, 'div', ['agio-handoff'], `handed off: ${chain}`));
  }
  if (view.session && view.session.forked_from) {
    const origin = el(doc, 'div', ['agio-fork-origin'],
      ` forked from session ${short(view.session.forked_from)} at step ${view.session.forked_at}`);
    origin.prepend(icon(doc, 'fork'));
    root.append(origin);
  }
  for (const step of view.steps) {
    root.append(renderStep(doc, step, view.transcript, view.handoffs.length > 0));
  }
  const trace = renderTrace(doc, view.traceSvg);
  if (trace) {
    root.append(trace);
  }
  if (run.status === 'completed' && run.output !== undefined) { // a typed agent's answer (null too: core.run.gave_answer)
    const output = el(doc, 'div', ['agio-output']);
    output.append(el(doc, 'div', ['agio-output-type'], `Output · ${String(run.output_type ?? '')}`));
    output.append(el(doc, 'pre', [], JSON.stringify(run.output, null, 1)));
    root.append(output);
  }
  if (run.error && run.status !== 'completed' && run.error !== run.status) { // "cancelled" is said by the badge
    root.append(el(doc, 'div', ['agio-error'], String(run.error)));
  }
  root.append(el(doc, 'div', ['agio-metrics'], metricsLine(view.runMetrics, true)));
  const controls = renderControls(view.transcript, run, doc);
  if (controls) {
    root.append(controls);
  }
  const feedback = TERMINAL_STATUS.has(String(run.status)) ? renderFeedback(doc, run.id) : null;
  if (feedback) {
    root.append(feedback);
  }
  return root;
}

/** JSON (object or string) to DOM; a malformed transcript becomes a clear inline message. */
export function renderTranscript(data: unknown, doc: Document): HTMLElement {
  try {
    return renderRun(foldEvents(parseTranscript(data)), doc);
  } catch (e) {
    return el(doc, 'div', ['agio-run', 'agio-invalid'], `Cannot show this agio transcript: ${(e as Error).message}`);
  }
}
