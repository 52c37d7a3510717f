// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { agioCellMime } from '../src/highlight';
import { MAGIC_EVENT, insertionIndex, magicButton, needsAgio, requestMagic, safeArg, shortArg } from '../src/magic';
import { renderTranscript } from '../src/render';

const RUN = { id: 'run00001aaaa', session_id: 'sess0001bbbb', status: 'completed', kind: 'run', attempt: 1,
  metrics: { steps: 3, tool_calls: 0, duration_ms: 174.2 } };

function ev(seq: number, type: string, payload: Record<string, any>) {
  return { type, run_id: RUN.id, session_id: RUN.session_id, seq, ts: 0, payload };
}

function step(sequence: number, role: string, content: string | null) {
  return { sequence, role, content, status: 'ok', attempt: 1, superseded: false, metrics: {}, tool_calls: [] };
}

function transcript(run: Record<string, any> = RUN, attempts?: unknown[]) {
  return {
    version: 1, run, session: null, attempts,
    events: [
      ev(1, 'run_started', { run: { ...run, status: 'running', metrics: {} } }),
      ev(2, 'step_completed', { step: step(1, 'user', 'hello') }),
      ev(3, 'step_completed', { step: step(2, 'assistant', 'hi there') }),
      ev(4, 'metrics', { sequence: 2, step: {}, run: { steps: 2, tool_calls: 0 } }),
      ev(5, 'run_completed', { run })
    ]
  };
}

/** Collects what the controls ask the notebook to run, the way the notebook plugin does. */
function listen(node: HTMLElement): string[] {
  const asked: string[] = [];
  document.body.append(node);
  node.addEventListener(MAGIC_EVENT, e => {
    asked.push((e as CustomEvent).detail.code);
    e.preventDefault();
  });
  return asked;
}

describe('transcript controls', () => {
  it('retry and fork ask for the equivalent magic, once per click, from the picked step', () => {
    document.body.replaceChildren();
    const node = renderTranscript(transcript(), document);
    const asked = listen(node);
    const retry = node.querySelector('select.agio-retry-picker') as HTMLSelectElement;
    const fork = node.querySelector('select.agio-fork-picker') as HTMLSelectElement;
    expect([...retry.options].map(o => o.textContent)).toEqual(['#2 assistant: hi there']);
    expect([...fork.options].map(o => o.textContent)).toEqual(['#1 user: hello', '#2 assistant: hi there']);
    expect(retry.value).toBe('2');
    expect(fork.value).toBe('2');
    (node.querySelector('button.agio-retry') as HTMLButtonElement).click();
    fork.value = '1';
    (node.querySelector('button.agio-fork') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio retry run00001 --from-seq 2',
      '%agio fork sess0001 --at 1 --run run00001']);
  });

  it('a run that used tools: the pickers offer only what the commands accept, the first click is valid', () => {
    document.body.replaceChildren();
    const call = { id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a":2,"b":3}' } };
    const call2 = { id: 'c2', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":1}' } };
    const t = transcript();
    t.events = [
      ev(1, 'run_started', { run: { ...RUN, status: 'running', metrics: {} } }),
      ev(2, 'step_completed', { step: step(1, 'user', 'add') }),
      ev(3, 'step_completed', { step: { ...step(2, 'assistant', null), tool_calls: [call, call2] } }),
      ev(4, 'step_completed', { step: { ...step(3, 'tool', '5'), tool_call_id: 'c1', name: 'add' } }),
      ev(5, 'step_completed', { step: { ...step(4, 'tool', '2'), tool_call_id: 'c2', name: 'add' } }),
      ev(6, 'step_completed', { step: step(5, 'assistant', '5 and 2') }),
      ev(7, 'run_completed', { run: RUN })
    ];
    const node = renderTranscript(t, document);
    const asked = listen(node);
    const fork = node.querySelector('select.agio-fork-picker') as HTMLSelectElement;
    const retry = node.querySelector('select.agio-retry-picker') as HTMLSelectElement;
    // inside the batch (after step 2 or 3) is no place to fork; a tool result is no place to retry from
    expect([...fork.options].map(o => o.value)).toEqual(['1', '4', '5']);
    expect([...retry.options].map(o => o.value)).toEqual(['2', '5']);
    expect(fork.value).toBe('5');
    expect(retry.value).toBe('5'); // the answer
    (node.querySelector('button.agio-fork') as HTMLButtonElement).click();
    (node.querySelector('button.agio-retry') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio fork sess0001 --at 5 --run run00001', '%agio retry run00001 --from-seq 5']);
  });

  it('under a superseded attempt the transcript says so and the controls act on that attempt', () => {
    document.body.replaceChildren();
    const attempts = [{ number: 1, run_id: RUN.id, status: 'completed', current: false },
      { number: 2, run_id: 'r2', status: 'completed', current: true }];
    const node = renderTranscript(transcript(RUN, attempts), document);
    const asked = listen(node);
    expect(node.querySelector('.agio-header .agio-superseded')!.textContent).toContain('superseded');
    expect(node.querySelector('.agio-superseded-note')!.textContent).toContain('attempt 2 is current');
    expect((node.querySelector('select.agio-attempt-picker') as HTMLSelectElement).value).toBe('1');
    (node.querySelector('button.agio-fork') as HTMLButtonElement).click();
    (node.querySelector('button.agio-use-attempt') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio fork sess0001 --at 2 --run run00001', '%agio use-attempt run00001 1']);
    const current = renderTranscript(transcript(RUN, attempts.map(a => ({ ...a, current: !a.current }))), document);
    expect(current.querySelector('.agio-superseded-note')).toBeNull();
    expect(current.querySelector('.agio-header .agio-superseded')).toBeNull();
  });

  it('a stopped run keeps its partial answer, marked, and offers no retry of a half-made tool batch', () => {
    const t = transcript({ ...RUN, status: 'cancelled' });
    t.events[2] = ev(3, 'step_completed', { step: { ...step(2, 'assistant', 'The answer is forty'), status: 'cancelled' } });
    const node = renderTranscript(t, document);
    const partial = node.querySelector('.agio-step.agio-partial') as HTMLElement;
    expect(partial.querySelector('.agio-text')!.textContent).toBe('The answer is forty');
    expect(partial.querySelector('.agio-partial-note')!.textContent).toBe('stopped: partial answer');
  });

  it('control cells hold only the command: agio is loaded silently first, and ids are the 8 characters shown', () => {
    expect(needsAgio('%agio retry r --from-seq 2')).toBe(true);
    expect(needsAgio('x = 1')).toBe(false);
    expect(shortArg('0123456789abcdef0123456789abcdef')).toBe('01234567');
    expect(shortArg('x{1}')).toBeNull();
  });

  it('icons are inline SVG with text beside them, never emoji', () => {
    const call = { id: 'c1', type: 'function', function: { name: 'add', arguments: '{}' } };
    const t = transcript();
    t.events.splice(3, 0, ev(9, 'step_completed', { step: { ...step(2, 'assistant', null), tool_calls: [call] } }));
    const node = renderTranscript({ ...t, session: { forked_from: 'sess0000', forked_at: 2 } }, document);
    const text = node.textContent ?? '';
    expect(text).not.toMatch(/\p{Extended_Pictographic}|⑂/u);
    expect(node.querySelector('.agio-tool-card summary svg.agio-icon-tool')).not.toBeNull();
    expect(node.querySelector('.agio-fork-origin svg.agio-icon-fork')).not.toBeNull();
    const up = node.querySelector('.agio-feedback .agio-thumb-up') as HTMLButtonElement;
    expect(up.querySelector('svg.agio-icon-thumb-up')!.getAttribute('aria-hidden')).toBe('true');
    expect(up.getAttribute('aria-label')).toBe('Feedback: this run was good (+1)');
    expect(up.textContent!.trim()).toBe('Good +1');
  });

  it('inserted cells go below the last one inserted for the same run (click order)', () => {
    expect(insertionIndex([undefined, undefined, undefined], 1, 'r')).toBe(2);
    expect(insertionIndex([undefined, undefined, 'r', 'r', undefined], 1, 'r')).toBe(4);
    expect(insertionIndex([undefined, undefined, 'other', undefined], 1, 'r')).toBe(2);
    expect(insertionIndex([undefined, 'r', undefined], 0, null)).toBe(1);
  });

  it('the attempt selector switches attempts through the kernel', () => {
    document.body.replaceChildren();
    const attempts = [{ number: 1, run_id: 'a', status: 'completed', current: false },
      { number: 2, run_id: RUN.id, status: 'completed', current: true },
      { number: 3, run_id: 'c', status: 'failed', current: false }];
    const node = renderTranscript(transcript(RUN, attempts), document);
    const asked = listen(node);
    const picker = node.querySelector('select.agio-attempt-picker') as HTMLSelectElement;
    expect([...picker.options].map(o => o.textContent)).toEqual(
      ['attempt 1 · completed', 'attempt 2 · completed · current', 'attempt 3 · failed']);
    expect(picker.value).toBe('2');
    picker.value = '1';
    (node.querySelector('button.agio-use-attempt') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio use-attempt run00001 1']);
  });

  it('an attempt that wrote no step is shown, disabled, with why; with nothing else to switch to, no button', () => {
    document.body.replaceChildren();
    const attempts = [{ number: 1, run_id: RUN.id, status: 'completed', current: true, steps: 2 },
      { number: 2, run_id: 'b', status: 'failed', current: false, steps: 0 },
      { number: 3, run_id: 'c', status: 'completed', current: false, steps: 1 }];
    const node = renderTranscript(transcript(RUN, attempts), document);
    const asked = listen(node);
    const picker = node.querySelector('select.agio-attempt-picker') as HTMLSelectElement;
    expect([...picker.options].map(o => [o.textContent, o.disabled])).toEqual([
      ['attempt 1 · completed · current', false], ['attempt 2 · failed · wrote no step, cannot be used', true],
      ['attempt 3 · completed', false]]);
    picker.value = '3';
    (node.querySelector('button.agio-use-attempt') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio use-attempt run00001 3']);
    const lonely = renderTranscript(transcript(RUN, attempts.slice(0, 2)), document);
    expect(lonely.querySelector('button.agio-use-attempt')).toBeNull();
    expect(lonely.querySelector('.agio-attempt-note')!.textContent).toContain('wrote no step');
  });

  it('one attempt: no selector; a running run: no controls', () => {
    expect(renderTranscript(transcript(RUN, [{ number: 1, run_id: RUN.id, status: 'completed', current: true }]),
      document).querySelector('.agio-attempt-picker')).toBeNull();
    const running = { ...RUN, status: 'running' };
    expect(renderTranscript({ ...transcript(running), events: [] }, document).querySelector('.agio-controls')).toBeNull();
  });

  it('ids that could smuggle code into a magic disable the controls', () => {
    for (const id of ['x{__import__("os").system("id")}', 'a b', '$HOME', 'x;y', '--background']) {
      const node = renderTranscript(transcript({ ...RUN, session_id: id }), document);
      expect(node.querySelector('.agio-controls')).toBeNull();
      expect(safeArg(id)).toBeNull();
    }
    expect(safeArg('abc-12_3.x')).toBe('abc-12_3.x');
    expect(safeArg(4)).toBe('4');
  });

  it('with no notebook to handle it, a click shows the command instead of doing nothing', () => {
    document.body.replaceChildren();
    const bar = document.createElement('div');
    const button = magicButton(document, 'Go', () => '%agio runs');
    bar.append(button);
    document.body.append(bar);
    expect(requestMagic(button, '%agio runs')).toBe(false);
    button.click();
    button.click();
    expect(bar.querySelectorAll('.agio-command-hint')).toHaveLength(1);
    expect(bar.querySelector('.agio-command-hint')!.textContent).toBe('run in a cell: %agio runs');
  });

  it('the footer shows the run totals from the terminal event, as the Python renderer does', () => {
    const node = renderTranscript(transcript(), document);
    expect(node.querySelector('.agio-metrics')!.textContent).toBe('3 steps (1 model call) · 0 tool calls · tokens unknown · total 174 ms');
  });
});

describe('%%agio highlighting', () => {
  it('picks Markdown for %%agio cells only', () => {
    expect(agioCellMime("%%agio forecaster\nWhat's the weather?")).toBe('text/x-markdown');
    expect(agioCellMime('\n%%agio')).toBe('text/x-markdown');
    expect(agioCellMime('%agio runs')).toBeNull();
    expect(agioCellMime('%%agiox')).toBeNull();
    expect(agioCellMime("x = 'a'")).toBeNull();
  });
});
