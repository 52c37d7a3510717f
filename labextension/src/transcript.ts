/**
 * The saved transcript of a run (`application/vnd.agio.run+json`) as data: its types, and the check of its
 * shape. The renderers (render.ts, debugger.ts, controls.ts) read it; nothing here touches the DOM.
 */

export const MIME_TYPE = 'application/vnd.agio.run+json';

export interface AgioEvent {
  type: string;
  run_id: string;
  session_id: string;
  seq: number;
  ts: number;
  payload: Record<string, any>;
}

export interface AttemptInfo {
  number: number;
  run_id: string;
  status: string;
  current: boolean;
  steps?: number;
}

export interface SeenRow {
  role: string;
  text: string;
  tokens: number;
  tokens_estimated: boolean;
  step: number | null;
  edited: boolean;
}

/** A model call's prompt as counted (messages, chat format and the reply's priming) and as the model reported it. */
export interface SeenTotal {
  prompt_tokens: number;
  estimated: boolean;
  reported: number | null;
  differs: boolean;
}

/** What each model call saw: distinct messages once, per call (its step number) their positions, and totals. */
export interface Seen {
  messages: SeenRow[];
  calls: Record<string, number[]>;
  totals?: Record<string, SeenTotal>;
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
