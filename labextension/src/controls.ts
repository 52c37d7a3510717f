/**
 * Retry, Fork and attempt selection under a finished run's transcript. Each acts through the
 * kernel by inserting and running the equivalent `%agio` command (magic.ts), so it works whenever a
 * kernel is attached, in a live notebook or a reopened one, and leaves a saved record.
 */

import { magicButton, safeArg } from './magic';
import type { Transcript } from './render';

export interface AttemptInfo {
  number: number;
  run_id: string;
  status: string;
  current: boolean;
  steps?: number;
}

export interface StepOption {
  sequence: number;
  label: string;
  role: string;
}

/** The steps a retry can start from or a fork can stop at: this run's steps, in order. */
export function stepOptions(t: Transcript): StepOption[] {
  const bySeq = new Map<number, StepOption>();
  for (const e of t.events) {
    const step = e.type === 'step_completed' ? e.payload.step : null;
    if (!step || typeof step.sequence !== 'number') {
      continue;
    }
    const text = String(step.content ?? '').replace(/\s+/g, ' ').trim();
    const who = step.role === 'tool' ? `tool ${step.name ?? ''}`.trim() : step.role;
    bySeq.set(step.sequence, {
      sequence: step.sequence,
      role: String(step.role),
      label: `#${step.sequence} ${who}` + (text ? `: ${text.length > 40 ? text.slice(0, 39) + '…' : text}` : '')
    });
  }
  return [...bySeq.values()].sort((a, b) => a.sequence - b.sequence);
}

export function retryCommand(runId: string, seq: number): string {
  return `%agio retry ${runId} --from-seq ${seq}`;
}

export function forkCommand(sessionId: string, seq: number): string {
  return `%agio fork ${sessionId} --at ${seq}`;
}

export function useAttemptCommand(runId: string, n: number): string {
  return `%agio use-attempt ${runId} ${n}`;
}

function option(doc: Document, value: string, label: string): HTMLOptionElement {
  const o = doc.createElement('option');
  o.value = value;
  o.textContent = label;
  return o;
}

/** The controls of a finished run, or null while it runs or when its ids cannot be used safely. */
export function renderControls(t: Transcript, run: Record<string, any>, doc: Document): HTMLElement | null {
  const runId = safeArg(run.id);
  const sessionId = safeArg(run.session_id);
  if (!runId || !sessionId || run.status === 'running' || run.status === undefined) {
    return null;
  }
  const bar = doc.createElement('div');
  bar.classList.add('agio-controls');
  const steps = stepOptions(t);
  if (steps.length) {
    const picker = doc.createElement('select');
    picker.classList.add('agio-step-picker');
    picker.title = 'the step to retry from or fork at';
    for (const s of steps) {
      picker.append(option(doc, String(s.sequence), s.label));
    }
    const answer = steps.find(s => s.role === 'assistant');
    if (answer) {
      picker.value = String(answer.sequence); // the usual retry: regenerate the answer
    }
    const seq = () => Number(picker.value);
    bar.append(
      picker,
      magicButton(doc, 'Retry from step', () => retryCommand(runId, seq()), ['agio-retry']),
      magicButton(doc, 'Fork at step', () => forkCommand(sessionId, seq()), ['agio-fork'])
    );
  }
  const attempts = (t.attempts ?? []).filter(a => Number.isInteger(a.number));
  if (attempts.length > 1) {
    const picker = doc.createElement('select');
    picker.classList.add('agio-attempt-picker');
    picker.title = 'attempts of this run';
    for (const a of attempts) {
      picker.append(option(doc, String(a.number),
        `attempt ${a.number} · ${a.status}` + (a.current ? ' · current' : '')));
    }
    const current = attempts.find(a => a.current) ?? attempts[attempts.length - 1];
    picker.value = String(current.number);
    bar.append(picker, magicButton(doc, 'Use attempt', () => useAttemptCommand(runId, Number(picker.value)),
      ['agio-use-attempt']));
  }
  return bar.childElementCount ? bar : null;
}
