/**
 * Pure rendering of an agio run transcript: JSON in, DOM out.
 *
 * Untrusted text (model output, tool arguments and results) only ever reaches the DOM through
 * textContent or attribute values, never innerHTML. The structure and class names follow the live
 * view and the static HTML fallback of the Python package.
 */

import { classToken, el } from './dom';
import { renderFeedback, renderMemoryCard, renderTrace } from './memory';
import { AttemptInfo, isSuperseded, renderControls } from './controls';
import { renderCardDebug, renderStepDebug, Seen } from './debugger';
import { icon } from './icons';

export const MIME_TYPE = 'application/vnd.agio.run+json';

export interface AgioEvent {
  type: string;
  run_id: string;
  session_id: string;
  seq: number;
  ts: number;
  payload: Record<string, any>;
}

export interface Transcript {
  version: number;
  run: Record<string, any> | null;
  session: Record<string, any> | null;
  events: AgioEvent[];
  trace_svg?: string | null;
  attempts?: AttemptInfo[];
  seen?: Seen; // what each model call saw (step mode's "What the model saw")
}

export interface ToolCard {
  id: string;
  name: string;
  arguments: string;
  status: string;
  result?: string;
  error?: string;
  errorType?: string;
  durationMs?: number;
  replayed?: boolean; // a side-effect call answered from the record, not run again
  displays: Display[];
  isolation?: string;
  diff?: string;
  nested?: AgioEvent[]; // the events of the run of an agent called as this tool (paths relative to it)
  nestedEnded?: string; // the outer run ended: how a nested run still running ends
}

/** A rich output of an action: a PNG (base64) or an HTML table from the sandbox (untrusted). */
export interface Display {
  mime: string;
  data: string;
}

export interface StepView {
  sequence: number;
  role: string;
  text: string;
  status: string;
  attempt: number;
  superseded: boolean;
  metrics: Record<string, any>;
  cards: ToolCard[];
  memory?: Record<string, any>;
}

export interface RunView {
  transcript: Transcript;
  run: Record<string, any>;
  session: Record<string, any> | null;
  steps: StepView[];
  runMetrics: Record<string, any>;
  traceSvg?: string | null;
  handoffs: { from: string; to: string }[];
}

const TERMINAL = new Set(['run_completed', 'run_failed', 'run_cancelled', 'run_max_steps', 'run_budget_exceeded']);
const TERMINAL_STATUS = new Set(['completed', 'failed', 'cancelled', 'max_steps', 'interrupted', 'budget_exceeded']);

/** Check the shape of a transcript; throw an Error saying what is wrong. */
export function parseTranscript(data: unknown): Transcript {
  let value = data;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch (e) {
      throw new Error(`the transcript is not valid JSON (${(e as Error).message})`);
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('the transcript is not a JSON object');
  }
  const t = value as Record<string, any>;
  if (typeof t.version !== 'number' || t.version > 1) {
    throw new Error(`unsupported transcript version ${JSON.stringify(t.version)}`);
  }
  if (!Array.isArray(t.events)) {
    throw new Error('the transcript has no "events" list');
  }
  for (const e of t.events) {
    if (!e || typeof e.type !== 'string' || typeof e.payload !== 'object' || e.payload === null) {
      throw new Error('the transcript has a malformed event');
    }
  }
  const attempts = Array.isArray(t.attempts) ? t.attempts : undefined;
  return { version: t.version, run: t.run ?? null, session: t.session ?? null, events: t.events, attempts,
    trace_svg: typeof t.trace_svg === 'string' ? t.trace_svg : null,
    seen: t.seen && typeof t.seen === 'object' ? t.seen : undefined };
}

/** Fold the events into steps and tool cards (the same fold as the Python RunView). */
export function foldEvents(t: Transcript): RunView {
  const bySeq = new Map<number, StepView>();
  const cards = new Map<string, ToolCard>();
  let run: Record<string, any> = t.run ?? {};
  let runMetrics: Record<string, any> = run.metrics ?? {};
  const handoffs: { from: string; to: string }[] = [];
  const stepFor = (sequence: number, role: string): StepView => {
    let s = bySeq.get(sequence);
    if (!s) {
      s = { sequence, role, text: '', status: 'ok', attempt: 1, superseded: false, metrics: {}, cards: [] };
      bySeq.set(sequence, s);
    }
    return s;
  };
  for (const e of t.events) {
    const p = e.payload;
    if (e.type === 'nested') {
      routeNested(cards, e);
    } else if (e.type === 'handoff') {
      handoffs.push({ from: String(p.from), to: String(p.to) });
      run = { ...run, agent_name: p.to };
    } else if (e.type === 'run_started' || TERMINAL.has(e.type)) {
      if (p.run) {
        if (!t.run) {
          run = { ...run, ...p.run };
        }
        // the footer folds the events as the Python renderer does, so both show the same totals
        runMetrics = p.run.metrics ?? runMetrics;
      }
    } else if (e.type === 'step_completed' && p.step) {
      const st = p.step;
      const view = stepFor(st.sequence, st.role);
      view.role = st.role;
      view.text = st.content ?? '';
      view.status = st.status ?? 'ok';
      view.attempt = st.attempt ?? 1;
      view.superseded = Boolean(st.superseded);
      view.metrics = st.metrics ?? {};
      if (st.extra?.kind === 'memory_read') {
        view.role = 'memory';
        view.text = '';
      }
      const answered = st.role === 'tool' ? cards.get(st.tool_call_id) : undefined;
      if (answered) {
        // figures and screenshots come whole with the tool step (the action events carry them cut)
        const actions = Array.isArray(st.extra?.actions) ? st.extra.actions : [];
        answered.displays = actions.flatMap((a: Record<string, any>) => actionDisplays(a ?? {}));
        const diffs = actions.map((a: Record<string, any>) => a?.output?.diff).filter((d: unknown) => typeof d === 'string');
        answered.diff = diffs.length ? diffs.join('') : undefined;
      }
      for (const call of st.tool_calls ?? []) {
        if (!cards.has(call.id)) {
          const card: ToolCard = {
            id: call.id,
            name: call.function?.name ?? '?',
            arguments: call.function?.arguments ?? '',
            status: 'running',
            displays: []
          };
          cards.set(call.id, card);
          view.cards.push(card);
        }
      }
    } else if (e.type === 'memory_read' && typeof p.sequence === 'number') {
      stepFor(p.sequence, 'memory').memory = p;
    } else if (e.type === 'approval_resolved') {
      const card = cards.get(p.tool_call_id);
      if (card && typeof p.arguments === 'string') {
        card.arguments = p.arguments;
      }
    } else if (e.type === 'tool_call_completed' || e.type === 'tool_call_failed') {
      const card = cards.get(p.tool_call_id);
      if (card) {
        card.durationMs = p.duration_ms;
        if (e.type === 'tool_call_completed') {
          card.status = 'ok';
          card.result = p.content;
          card.replayed = Boolean(p.replayed);
        } else {
          card.status = p.error_type === 'rejected' ? 'rejected' : 'error';
          card.error = p.error;
          card.errorType = p.error_type;
        }
      }
    } else if (e.type === 'action_completed' || e.type === 'action_failed') {
      const card = cards.get(p.tool_call_id);
      if (card) {
        if (typeof p.input?.isolation === 'string') {
          card.isolation = p.input.isolation;
        }
      }
    } else if (e.type === 'metrics') {
      runMetrics = p.run ?? runMetrics;
      const view = bySeq.get(p.sequence);
      if (view && p.step) {
        view.metrics = p.step;
      }
    }
  }
  if (TERMINAL_STATUS.has(run.status)) {
    // the run is over: a call still running or awaiting approval never finished (as the Python fold says)
    for (const card of cards.values()) {
      const ended = run.status === 'cancelled' ? 'cancelled' : 'interrupted';
      if (card.status === 'running' || card.status === 'awaiting_approval') {
        card.status = ended;
      }
      if (card.nested) {
        card.nestedEnded = ended; // a nested run whose end never reached this stream ends with it
      }
    }
  }
  const steps = [...bySeq.values()].filter(s => s.role !== 'tool').sort((a, b) => a.sequence - b.sequence);
  return { transcript: t, run, session: t.session, steps, runMetrics, traceSvg: t.trace_svg, handoffs };
}

/** A nested run's event goes to the card of the call that started it, one level of its path down. */
function routeNested(cards: Map<string, ToolCard>, e: AgioEvent): void {
  const path = Array.isArray(e.payload.path) ? e.payload.path : [];
  const inner = e.payload.event;
  const card = path.length ? cards.get(path[0]?.tool_call_id) : undefined;
  if (!card || !inner || typeof inner.type !== 'string') {
    return;
  }
  card.nested = card.nested ?? [];
  card.nested.push(path.length > 1 ? { ...e, payload: { path: path.slice(1), event: inner } } : inner);
}

/** Figures and tables of an action record, and a browser screenshot as a figure. */
export function actionDisplays(action: Record<string, any>): Display[] {
  const out = action.output ?? {};
  const shown: Display[] = [];
  for (const d of Array.isArray(out.displays) ? out.displays : []) {
    if (d && typeof d.data === 'string' && (d.mime === 'image/png' || d.mime === 'text/html')) {
      shown.push({ mime: d.mime, data: d.data });
    }
  }
  if (typeof out.screenshot === 'string') {
    shown.push({ mime: 'image/png', data: out.screenshot });
  }
  return shown;
}

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
  if (run) {
    parts.push(`${m.steps ?? 0} steps`);
    parts.push(`${m.tool_calls ?? 0} tool calls` + (m.tool_errors ? ` (${m.tool_errors} failed)` : ''));
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
    parts.push(`paused ${Math.round(m.paused_ms)} ms`); // step mode: its own figure (debugger.ts)
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
  if (card.nested) {
    details.open = true;
    details.append(renderNestedRun(doc, card.nested, card.nestedEnded));
  }
  return details;
}

/** The run of an agent called as a tool, inside its card: its steps and cards, at any depth. */
function renderNestedRun(doc: Document, events: AgioEvent[], ended?: string): HTMLElement {
  let view = foldEvents({ version: 1, run: null, session: null, events });
  if (ended && !TERMINAL_STATUS.has(String(view.run.status))) {
    // fold again as if its run had ended so: its own cards and nested runs settle the same way
    const last = { type: 'run_cancelled', run_id: '', session_id: '', seq: 0, ts: 0,
      payload: { run: { ...view.run, status: ended } } };
    view = foldEvents({ version: 1, run: null, session: null, events: [...events, last] });
  }
  const box = el(doc, 'details', ['agio-nested-run']) as HTMLDetailsElement;
  box.open = true;
  box.dataset.agioRun = String(view.run.id ?? '');
  const summary = el(doc, 'summary');
  summary.append('agent ', el(doc, 'b', ['agio-nested-agent'], String(view.run.agent_name ?? '?')), ' ',
    statusBadge(doc, String(view.run.status ?? 'running')), el(doc, 'span', ['agio-ids'], ` run ${short(view.run.id)}`));
  box.append(summary);
  for (const step of view.steps) {
    box.append(renderStep(doc, step));
  }
  if (view.run.error && view.run.status !== 'completed') {
    box.append(el(doc, 'div', ['agio-error'], String(view.run.error)));
  }
  box.append(el(doc, 'div', ['agio-metrics'], metricsLine(view.runMetrics, true)));
  return box;
}

function renderStep(doc: Document, step: StepView, t?: Transcript): HTMLElement {
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
  const who = step.role === 'user' ? 'You' : step.role === 'memory' ? 'Memory' : 'Assistant';
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
    root.append(renderStep(doc, step, view.transcript));
  }
  const trace = renderTrace(doc, view.traceSvg);
  if (trace) {
    root.append(trace);
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
