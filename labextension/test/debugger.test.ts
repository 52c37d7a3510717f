// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { pauseKey } from '../src/debugger';
import { metricsLine, renderTranscript } from '../src/render';

const RUN = { id: 'run00001aaaa', session_id: 'sess0001bbbb', status: 'completed', kind: 'run', attempt: 1, metrics: {} };
const EVIL = '<img src=x onerror="window.__pwned=1">';

function ev(seq: number, type: string, payload: Record<string, any>) {
  return { type, run_id: RUN.id, session_id: RUN.session_id, seq, ts: 0, payload };
}

const call = { id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a": 2, "b": 3}' } };
const transcript = {
  version: 1, run: RUN, session: null,
  events: [
    ev(1, 'run_started', { run: { ...RUN, status: 'running' } }),
    ev(2, 'step_completed', { step: { sequence: 1, role: 'user', content: 'What is 2 + 3?', tool_calls: [] } }),
    ev(3, 'run_paused', { kind: 'model', sequence: 2, index: 1, messages: 2, tokens: 8, tokens_estimated: true }),
    ev(4, 'run_resumed', { kind: 'model', sequence: 2, action: 'continue', paused_ms: 1500, edited: ['messages'] }),
    ev(5, 'step_completed', { step: { sequence: 2, role: 'assistant', content: null, tool_calls: [call],
      extra: { request: { edited: { fields: ['messages'], proposed: { messages: [] } } } } } }),
    ev(6, 'tool_call_started', { tool_call_id: 'c1', name: 'add', arguments: call.function.arguments, sequence: 2 }),
    ev(7, 'run_paused', { kind: 'tool', sequence: 3, index: 3, tool_call_id: 'c1', name: 'add' }),
    ev(8, 'run_resumed', { kind: 'tool', sequence: 3, tool_call_id: 'c1', name: 'add', action: 'continue',
      paused_ms: 800, edited: ['arguments'] }),
    ev(9, 'tool_call_completed', { tool_call_id: 'c1', name: 'add', content: '50', sequence: 3 }),
    ev(10, 'step_completed', { step: { sequence: 3, role: 'tool', content: `50 ${EVIL}`, tool_call_id: 'c1', name: 'add',
      tool_calls: [], extra: { edited: { arguments: { proposed: '{"a": 2, "b": 3}', sent: '{"a": 20, "b": 30}' } } } } }),
    ev(11, 'step_completed', { step: { sequence: 4, role: 'assistant', content: 'fifty', tool_calls: [] } }),
    ev(12, 'run_completed', { run: RUN })
  ],
  seen: {
    messages: [
      { role: 'user', text: `What is 20 + 30? ${EVIL}`, tokens: 9, tokens_estimated: true, step: null, edited: true },
      { role: 'user', text: 'What is 2 + 3?', tokens: 4, tokens_estimated: true, step: 1, edited: false },
      { role: 'assistant', text: 'add({"a": 2, "b": 3})', tokens: 6, tokens_estimated: true, step: 2, edited: false },
      { role: 'tool', text: '50', tokens: 1, tokens_estimated: true, step: 3, edited: false }
    ],
    calls: { '2': [0], '4': [1, 2, 3] }
  }
};

describe('step mode in the transcript', () => {
  it('shows pauses, edits and what each model call saw, as text only', () => {
    const node = renderTranscript(transcript, document);
    const marks = Array.from(node.querySelectorAll('.agio-pause-mark')).map(n => n.textContent);
    expect(marks).toEqual([
      ' paused before the model call (step 2) → continue, 1.5 s · edited messages',
      ' paused before tool call add (step 3) → continue, 0.8 s · edited arguments'
    ]);
    const badges = node.querySelectorAll('.agio-edited');
    expect(badges.length).toBe(2);
    expect((badges[0] as HTMLElement).title).toBe('request: messages');
    expect(node.querySelector('.agio-edited-args')?.textContent).toBe('{"a": 20, "b": 30}');
    const seen = Array.from(node.querySelectorAll('details.agio-seen'));
    expect(seen.map(d => d.querySelector('summary')?.textContent)).toEqual([
      'What the model saw · 1 message · ~9 tokens (estimated)',
      'What the model saw · 3 messages · ~11 tokens (estimated)'
    ]);
    expect(seen[0].querySelector('.agio-seen-edited .agio-seen-step')?.textContent).toBe(' edited');
    expect(Array.from(seen[1].querySelectorAll('.agio-seen-step')).map(n => n.textContent)).toEqual(['#1', '#2', '#3']);
    expect(metricsLine({ model_ms: 3, paused_ms: 2500.4, duration_ms: 2600 })).toBe(
      'tokens unknown · model 3 ms · paused 2.5 s · total 2600 ms');
    // the pause sign is drawn (an SVG icon), never a character an emoji font must supply
    expect(node.querySelectorAll('.agio-pause-mark svg.agio-icon-pause').length).toBe(2);
    expect(node.textContent).not.toMatch(/[\u23F8\u23F8\uFE0F]/);
    expect(node.querySelector('img')).toBeNull();
    expect(node.textContent).toContain(EVIL);
  });

  it('marks a pause the run ended at', () => {
    const ended = { ...transcript, events: [...transcript.events.slice(0, 7), ev(8, 'run_cancelled', { run: { ...RUN, status: 'cancelled' } })] };
    const marks = Array.from(renderTranscript(ended, document).querySelectorAll('.agio-pause-mark')).map(n => n.textContent);
    expect(marks[marks.length - 1]).toBe(' paused before tool call add (step 3) → ended here');
  });

  it('clicks a pause button for its key, but not while typing in an editor', () => {
    document.body.innerHTML = '<div class="agio-pause"><textarea></textarea><button class="agio-pause-step">Step</button>'
      + '<button class="agio-pause-continue">Continue</button></div>';
    const clicks: string[] = [];
    document.querySelectorAll('button').forEach(b => b.addEventListener('click', () => clicks.push(b.className)));
    const button = document.querySelector('.agio-pause-continue') as HTMLElement;
    expect(pauseKey(new KeyboardEvent('keydown', { key: 's' }) as KeyboardEvent & { target: any }) ).toBe(false);
    const key = (target: Element, k: string) => {
      const event = new KeyboardEvent('keydown', { key: k, bubbles: true, cancelable: true });
      let handled = false;
      target.addEventListener('keydown', e => { handled = pauseKey(e as KeyboardEvent); }, { once: true });
      target.dispatchEvent(event);
      return handled;
    };
    expect(key(button, 's')).toBe(true);
    expect(key(button, 'c')).toBe(true);
    expect(key(document.querySelector('textarea')!, 'c')).toBe(false);
    expect(key(button, 'x')).toBe(false);
    expect(clicks).toEqual(['agio-pause-step', 'agio-pause-continue']);
  });
});
