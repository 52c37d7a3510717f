/**
 * A run's transcript folded into steps and tool cards: the same fold as the Python `RunView`
 * (agio_notebook/notebook/view_model.py), one handler per event type. `tests/fixtures/fold_cases.json`
 * holds events with the state both folds must reach; the tests of both languages read it.
 */

import type { AgioEvent, Transcript } from './transcript';

export interface ToolCard {
  id: string;
  name: string;
  arguments: string;
  /** pending (asked for, not started) | paused (step mode waits before it) | running | awaiting_approval |
   * ok | error | rejected | cancelled | interrupted */
  status: string;
  result?: string;
  error?: string;
  errorType?: string;
  durationMs?: number;
  sequence?: number; // of the tool step
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
  complete: boolean;
  memory?: Record<string, any>;
  agent?: string; // a model step: the agent that made it (it changes at a handoff)
}

export interface RunView {
  transcript: Transcript;
  run: Record<string, any>;
  session: Record<string, any> | null;
  steps: StepView[];
  runMetrics: Record<string, any>;
  traceSvg?: string | null;
  handoffs: { from: string; to: string }[];
  /** step mode: the pause the run waits at now */
  paused: Record<string, any> | null;
  /** every card, in the order they were asked for */
  cards: ToolCard[];
}

export const TERMINAL = new Set(['run_completed', 'run_failed', 'run_cancelled', 'run_max_steps', 'run_budget_exceeded']);
export const TERMINAL_STATUS = new Set(['completed', 'failed', 'cancelled', 'max_steps', 'interrupted', 'budget_exceeded']);
export const UNFINISHED = new Set(['pending', 'paused', 'running', 'awaiting_approval']);

/** The state of a fold in progress. */
interface Fold {
  t: Transcript;
  run: Record<string, any>;
  runMetrics: Record<string, any>;
  bySeq: Map<number, StepView>;
  cards: Map<string, ToolCard>;
  handoffs: { from: string; to: string }[];
  holder?: string;
  paused: Record<string, any> | null;
  beforePause: Map<string, string>; // a paused card's status before the pause
}

function stepFor(f: Fold, sequence: number, role: string): StepView {
  let s = f.bySeq.get(sequence);
  if (!s) {
    s = { sequence, role, text: '', status: 'ok', attempt: 1, superseded: false, metrics: {}, cards: [], complete: false };
    f.bySeq.set(sequence, s);
  }
  return s;
}

type Handler = (f: Fold, p: Record<string, any>, type: string) => void;

const runRecord: Handler = (f, p) => {
  if (!p.run) {
    return;
  }
  if (!f.t.run) {
    f.run = { ...f.run, ...p.run };
  }
  // the footer folds the events as the Python renderer does, so both show the same totals
  f.runMetrics = p.run.metrics ?? f.runMetrics;
  f.holder = f.holder ?? p.run.agent_name ?? undefined;
};

const toolEnded: Handler = (f, p, type) => {
  const card = f.cards.get(p.tool_call_id);
  if (!card) {
    return;
  }
  card.durationMs = p.duration_ms;
  card.sequence = p.sequence;
  if (type === 'tool_call_completed') {
    card.status = 'ok';
    card.result = p.content;
    card.replayed = Boolean(p.replayed);
  } else {
    card.status = p.error_type === 'rejected' ? 'rejected' : 'error';
    card.error = p.error;
    card.errorType = p.error_type;
  }
};

const HANDLERS: Record<string, Handler> = {
  nested: (f, p) => routeNested(f.cards, p),
  handoff: (f, p) => {
    f.handoffs.push({ from: String(p.from), to: String(p.to) });
    f.run = { ...f.run, agent_name: p.to };
    f.holder = String(p.to);
  },
  step_delta: (f, p) => {
    if (typeof p.content === 'string' && typeof p.sequence === 'number') {
      stepFor(f, p.sequence, 'assistant').text += p.content;
    }
  },
  run_started: runRecord,
  run_completed: runRecord,
  run_failed: runRecord,
  run_cancelled: runRecord,
  run_max_steps: runRecord,
  run_budget_exceeded: runRecord,
  step_completed: (f, p) => {
    const st = p.step;
    if (!st) {
      return;
    }
    const view = stepFor(f, st.sequence, st.role);
    view.role = st.role;
    view.text = st.content ?? '';
    view.status = st.status ?? 'ok';
    view.attempt = st.attempt ?? 1;
    view.superseded = Boolean(st.superseded);
    view.metrics = st.metrics ?? {};
    view.complete = true;
    if (st.extra?.kind === 'memory_read') {
      view.role = 'memory';
      view.text = '';
    }
    const answered = st.role === 'tool' ? f.cards.get(st.tool_call_id) : undefined;
    if (answered) {
      // figures and screenshots come whole with the tool step (the action events carry them cut)
      const actions = Array.isArray(st.extra?.actions) ? st.extra.actions : [];
      answered.displays = actions.flatMap((a: Record<string, any>) => actionDisplays(a ?? {}));
      const diffs = actions.map((a: Record<string, any>) => a?.output?.diff).filter((d: unknown) => typeof d === 'string');
      answered.diff = diffs.length ? diffs.join('') : undefined;
      const edited = st.extra?.edited ?? {};
      if (edited.result || edited.skipped) {
        answered.result = st.content ?? ''; // what the model read instead of the tool's own result
      }
      if (typeof edited.arguments?.sent === 'string') {
        answered.arguments = edited.arguments.sent;
      }
    }
    if (st.role === 'assistant') {
      view.agent = f.holder;
      for (const call of st.tool_calls ?? []) {
        if (!f.cards.has(call.id)) {
          const card: ToolCard = { id: call.id, name: call.function?.name ?? '?', arguments: call.function?.arguments ?? '',
            status: 'pending', displays: [] };
          f.cards.set(call.id, card);
          view.cards.push(card);
        }
      }
    }
  },
  tool_call_started: (f, p) => {
    let card = f.cards.get(p.tool_call_id);
    if (!card) {
      card = { id: p.tool_call_id, name: String(p.name ?? '?'), arguments: String(p.arguments ?? ''), status: 'pending',
        displays: [] };
      f.cards.set(card.id, card);
      stepFor(f, p.sequence, 'assistant').cards.push(card);
    }
    card.status = 'running';
  },
  approval_requested: (f, p) => {
    const card = f.cards.get(p.tool_call_id);
    if (card) {
      card.status = 'awaiting_approval';
    }
  },
  approval_resolved: (f, p) => {
    const card = f.cards.get(p.tool_call_id);
    if (card) {
      if (typeof p.arguments === 'string') {
        card.arguments = p.arguments;
      }
      card.status = p.approved ? 'running' : 'rejected';
    }
  },
  tool_call_completed: toolEnded,
  tool_call_failed: toolEnded,
  memory_read: (f, p) => {
    if (typeof p.sequence === 'number') {
      stepFor(f, p.sequence, 'memory').memory = p;
    }
  },
  action_completed: (f, p) => {
    const card = f.cards.get(p.tool_call_id);
    if (card && typeof p.input?.isolation === 'string') {
      card.isolation = p.input.isolation;
    }
  },
  run_paused: (f, p) => {
    f.paused = p;
    const card = f.cards.get(p.tool_call_id);
    if (card && p.kind === 'tool' && (card.status === 'pending' || card.status === 'running')) {
      f.beforePause.set(card.id, card.status);
      card.status = 'paused'; // waiting before the tool runs: it has not run yet
    }
  },
  run_resumed: (f, p) => {
    f.paused = null;
    const card = f.cards.get(p.tool_call_id);
    if (card && card.status === 'paused') {
      card.status = f.beforePause.get(card.id) ?? 'pending';
      f.beforePause.delete(card.id);
    }
  },
  metrics: (f, p) => {
    f.runMetrics = p.run ?? f.runMetrics;
    const view = f.bySeq.get(p.sequence);
    if (view && p.step) {
      view.metrics = p.step;
    }
  }
};
HANDLERS.action_failed = HANDLERS.action_completed;

/** Fold the events into steps and tool cards (the same fold as the Python RunView). */
export function foldEvents(t: Transcript): RunView {
  const f: Fold = { t, run: t.run ?? {}, runMetrics: t.run?.metrics ?? {}, bySeq: new Map(), cards: new Map(),
    handoffs: [], paused: null, beforePause: new Map() };
  for (const e of t.events) {
    HANDLERS[e.type]?.(f, e.payload, e.type);
  }
  if (TERMINAL_STATUS.has(f.run.status)) {
    // the run is over: a call not finished never will (as the Python fold's settle_cards says)
    const ended = f.run.status === 'cancelled' ? 'cancelled' : 'interrupted';
    for (const card of f.cards.values()) {
      if (UNFINISHED.has(card.status)) {
        card.status = ended;
      }
      if (card.nested) {
        card.nestedEnded = ended; // a nested run whose end never reached this stream ends with it
      }
    }
    f.paused = null;
  }
  const steps = [...f.bySeq.values()].filter(s => s.role !== 'tool').sort((a, b) => a.sequence - b.sequence);
  const all = [...f.bySeq.values()].sort((a, b) => a.sequence - b.sequence);
  return { transcript: t, run: f.run, session: t.session, steps, runMetrics: countedMetrics(f.runMetrics, all,
    [...f.cards.values()]), traceSvg: t.trace_svg, handoffs: f.handoffs, paused: f.paused, cards: [...f.cards.values()] };
}

/**
 * The run's metrics as its footer shows them: counts and tokens the run never reported are taken from the
 * steps shown (a nested run cancelled with its caller: its end, and its totals, never reached this
 * stream), and every tool card counts, with those that never finished (Python: RunView.counted_metrics).
 */
function countedMetrics(reported: Record<string, any>, steps: StepView[], cards: ToolCard[]): Record<string, any> {
  const complete = steps.filter(s => s.complete);
  const models = complete.filter(s => s.role === 'assistant');
  const counted: Record<string, any> = { steps: complete.length, model_calls: models.length };
  for (const key of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    const known = models.map(s => s.metrics?.[key]).filter((v): v is number => typeof v === 'number');
    counted[key] = known.length ? known.reduce((a, b) => a + b, 0) : null;
  }
  const shown: Record<string, any> = { ...reported };
  for (const [key, value] of Object.entries(counted)) {
    if (!shown[key] && value) {
      shown[key] = value;
    }
  }
  shown.tool_calls = Math.max(Number(shown.tool_calls) || 0, cards.length);
  const unfinished = cards.filter(c => c.status === 'cancelled' || c.status === 'interrupted').length;
  if (unfinished) {
    shown.tool_unfinished = unfinished;
  }
  return shown;
}

/** The run of an agent called as a tool, from its card: folded as if it ended with its caller when its
 * own end never reached this stream (its cards and nested runs settle the same way). */
export function foldNested(card: ToolCard): RunView | null {
  if (!card.nested) {
    return null;
  }
  const events = card.nested;
  const view = foldEvents({ version: 1, run: null, session: null, events });
  if (!card.nestedEnded || TERMINAL_STATUS.has(String(view.run.status))) {
    return view;
  }
  const last = { type: 'run_cancelled', run_id: '', session_id: '', seq: 0, ts: 0,
    payload: { run: { ...view.run, status: card.nestedEnded } } };
  return foldEvents({ version: 1, run: null, session: null, events: [...events, last] });
}

/** A nested run's event goes to the card of the call that started it, one level of its path down. */
function routeNested(cards: Map<string, ToolCard>, p: Record<string, any>): void {
  const path = Array.isArray(p.path) ? p.path : [];
  const inner = p.event;
  const card = path.length ? cards.get(path[0]?.tool_call_id) : undefined;
  if (!card || !inner || typeof inner.type !== 'string') {
    return;
  }
  card.nested = card.nested ?? [];
  card.nested.push(path.length > 1
    ? { type: 'nested', run_id: '', session_id: '', seq: 0, ts: 0, payload: { path: path.slice(1), event: inner } }
    : inner);
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
