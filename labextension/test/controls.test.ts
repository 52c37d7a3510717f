// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { agioCellMime } from '../src/highlight';
import { MAGIC_EVENT, magicButton, requestMagic, safeArg } from '../src/magic';
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
    const picker = node.querySelector('select.agio-step-picker') as HTMLSelectElement;
    expect([...picker.options].map(o => o.textContent)).toEqual(['#1 user: hello', '#2 assistant: hi there']);
    expect(picker.value).toBe('2');
    (node.querySelector('button.agio-retry') as HTMLButtonElement).click();
    picker.value = '1';
    (node.querySelector('button.agio-fork') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio retry run00001aaaa --from-seq 2', '%agio fork sess0001bbbb --at 1']);
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
    expect(asked).toEqual(['%agio use-attempt run00001aaaa 1']);
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
    expect(node.querySelector('.agio-metrics')!.textContent).toBe('3 steps · 0 tool calls · total 174 ms');
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
