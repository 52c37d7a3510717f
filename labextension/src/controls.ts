/**
 * Retry, Fork and attempt selection under a finished run's transcript. Each acts through the
 * kernel by inserting and running the equivalent `%agio` command (magic.ts), so it works whenever a
 * kernel is attached, in a live notebook or a reopened one, and leaves a saved record.
 *
 * Every picker offers only the steps its command accepts (the same rules as the kernel's
 * `plan_retry` and `fork_session`), and the commands name this transcript's own run, so a control
 * under a superseded attempt acts on the steps shown above it, not on whatever is current now.
 */

import { el } from './dom';
import { magicButton, shortArg } from './magic';
import type { AttemptInfo } from './transcript';

export type { AttemptInfo };

/** What the controls need of a transcript (render.ts's Transcript satisfies it). */
export interface ControlsInput {
  events: { type: string; payload: Record<string, any> }[];
  attempts?: AttemptInfo[];
}

export interface StepOption {
  sequence: number;
  label: string;
  role: string;
  /** steps 1..sequence end where a model call can follow: no tool call of theirs is unanswered */
  complete: boolean;
  answer: boolean; // an assistant step without tool calls
}

/** This run's steps in order, each with whether a fork may stop there. */
export function stepOptions(t: ControlsInput): StepOption[] {
  const bySeq = new Map<number, Record<string, any>>();
  for (const e of t.events) {
    const step = e.type === 'step_completed' ? e.payload.step : null;
    if (step && typeof step.sequence === 'number') {
      bySeq.set(step.sequence, step);
    }
  }
  const pending = new Set<string>();
  const options: StepOption[] = [];
  for (const step of [...bySeq.values()].sort((a, b) => a.sequence - b.sequence)) {
    const calls: any[] = Array.isArray(step.tool_calls) ? step.tool_calls : [];
    for (const call of calls) {
      pending.add(String(call.id));
    }
    if (step.role === 'tool') {
      pending.delete(String(step.tool_call_id));
    }
    const text = String(step.content ?? '').replace(/\s+/g, ' ').trim();
    const who = step.role === 'tool' ? `tool ${step.name ?? ''}`.trim()
      : step.extra?.kind === 'memory_read' ? 'memory' : step.role;
    options.push({
      sequence: step.sequence,
      role: step.extra?.kind === 'memory_read' ? 'memory' : String(step.role),
      complete: pending.size === 0,
      answer: step.role === 'assistant' && calls.length === 0,
      label: `#${step.sequence} ${who}` + (text ? `: ${text.length > 40 ? text.slice(0, 39) + '…' : text}` : '')
    });
  }
  return options;
}

/** Where a retry may start: an assistant step whose preceding steps are complete. */
export function retryOptions(steps: StepOption[]): StepOption[] {
  return steps.filter((s, i) => s.role === 'assistant' && (i === 0 || steps[i - 1].complete));
}

/** Where a fork may stop: after a whole tool batch, never inside one. */
export function forkOptions(steps: StepOption[]): StepOption[] {
  return steps.filter(s => s.complete);
}

export function retryCommand(runId: string, seq: number): string {
  return `%agio retry ${runId} --from-seq ${seq}`;
}

export function forkCommand(sessionId: string, seq: number, runId?: string): string {
  return `%agio fork ${sessionId} --at ${seq}` + (runId ? ` --run ${runId}` : '');
}

export function useAttemptCommand(runId: string, n: number): string {
  return `%agio use-attempt ${runId} ${n}`;
}

/** Whether this run is no longer the current attempt (a retry replaced it), as far as the transcript knows. */
export function isSuperseded(t: ControlsInput, run: Record<string, any>): boolean {
  return Boolean(run.superseded_by) || (t.attempts ?? []).some(a => a.run_id === run.id && a.current === false);
}

function option(doc: Document, value: string, label: string): HTMLOptionElement {
  const o = doc.createElement('option');
  o.value = value;
  o.textContent = label;
  return o;
}

function picker(doc: Document, classes: string[], title: string, steps: StepOption[], chosen: StepOption): HTMLSelectElement {
  const select = doc.createElement('select');
  select.classList.add(...classes);
  select.title = title;
  select.setAttribute('aria-label', title);
  for (const s of steps) {
    select.append(option(doc, String(s.sequence), s.label));
  }
  select.value = String(chosen.sequence);
  return select;
}

/** The controls of a finished run, or null while it runs or when its ids cannot be used safely. */
export function renderControls(t: ControlsInput, run: Record<string, any>, doc: Document): HTMLElement | null {
  const runId = shortArg(run.id);
  const sessionId = shortArg(run.session_id);
  if (!runId || !sessionId || run.status === 'running' || run.status === undefined) {
    return null;
  }
  const bar = el(doc, 'div', ['agio-controls']);
  const attempts = (t.attempts ?? []).filter(a => Number.isInteger(a.number));
  const superseded = isSuperseded(t, run);
  if (superseded) {
    const current = attempts.find(a => a.current);
    bar.append(el(doc, 'div', ['agio-superseded-note'],
      'This attempt is superseded' + (current ? ` (attempt ${current.number} is current)` : '') +
      ': Fork copies the steps shown here; Retry makes it current again, then retries from the step picked.'));
  }
  const steps = stepOptions(t);
  const retries = retryOptions(steps);
  if (retries.length) {
    const answers = retries.filter(s => s.answer);
    const chosen = answers.length ? answers[answers.length - 1] : retries[retries.length - 1];
    const select = picker(doc, ['agio-retry-picker'], 'the step to retry from', retries, chosen);
    bar.append(select, magicButton(doc, 'Retry from step', () => retryCommand(runId, Number(select.value)),
      ['agio-retry']));
  }
  const forks = forkOptions(steps);
  if (forks.length) {
    const select = picker(doc, ['agio-fork-picker'], 'the step to fork at', forks, forks[forks.length - 1]);
    bar.append(select, magicButton(doc, 'Fork at step', () => forkCommand(sessionId, Number(select.value), runId),
      ['agio-fork']));
  }
  if (attempts.length > 1) {
    const select = doc.createElement('select');
    select.classList.add('agio-attempt-picker');
    select.title = 'attempts of this run';
    select.setAttribute('aria-label', select.title);
    for (const a of attempts) {
      // an attempt that wrote no step (it failed at once) has nothing to make current: shown, not offered
      const usable = a.steps !== 0;
      const o = option(doc, String(a.number), `attempt ${a.number} · ${a.status}` + (a.current ? ' · current' : '')
        + (usable ? '' : ' · wrote no step, cannot be used'));
      o.disabled = !usable;
      select.append(o);
    }
    // under a superseded attempt, "Use attempt" offers the one shown; otherwise the current one
    const usable = attempts.filter(a => a.steps !== 0);
    const shown = superseded ? usable.find(a => a.run_id === run.id) : undefined;
    const chosen = shown ?? usable.find(a => a.current) ?? usable[usable.length - 1];
    if (chosen) {
      select.value = String(chosen.number);
    }
    if (usable.length > 1) {
      bar.append(select, magicButton(doc, 'Use attempt', () => useAttemptCommand(runId, Number(select.value)),
        ['agio-use-attempt']));
    } else {
      bar.append(select, el(doc, 'span', ['agio-attempt-note'], 'the other attempts wrote no step: nothing to switch to'));
    }
  }
  return bar.querySelector('button') ? bar : null;
}
