// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { foldEvents, metricsLine, parseTranscript, renderTranscript } from '../src/render';

const RUN = { id: 'run00001aaaa', session_id: 'sess0001bbbb', status: 'completed', kind: 'run', attempt: 1,
  metrics: { steps: 4, tool_calls: 2, tool_errors: 1, total_tokens: 42, prompt_tokens: 30, completion_tokens: 12,
    duration_ms: 12.5 } };
const EVIL = '<img src=x onerror="window.__pwned=1">';

function ev(seq: number, type: string, payload: Record<string, any>) {
  return { type, run_id: RUN.id, session_id: RUN.session_id, seq, ts: 0, payload };
}

function step(sequence: number, role: string, content: string | null, extra: Record<string, any> = {}) {
  return { sequence, role, content, status: 'ok', attempt: 1, superseded: false, metrics: {}, tool_calls: [], ...extra };
}

const transcript = {
  version: 1, run: RUN, session: { session_id: RUN.session_id, forked_from: 'origin99zzzz', forked_at: 3 },
  events: [
    ev(1, 'run_started', { run: { ...RUN, status: 'running' } }),
    ev(2, 'step_completed', { step: step(1, 'user', `hi ${EVIL}`) }),
    ev(3, 'step_completed', { step: step(2, 'assistant', null, {
      metrics: { total_tokens: 20, ttft_ms: 3.2 },
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } },
        { id: 'c2', type: 'function', function: { name: 'divide', arguments: '{"a":1,"b":0}' } }] }) }),
    ev(4, 'tool_call_started', { tool_call_id: 'c1', name: 'add', arguments: '{"a":1,"b":2}', sequence: 2 }),
    ev(5, 'tool_call_completed', { tool_call_id: 'c1', name: 'add', content: EVIL, duration_ms: 1.2, sequence: 3 }),
    ev(6, 'tool_call_failed', { tool_call_id: 'c2', name: 'divide', error: 'ZeroDivisionError: division by zero',
      error_type: 'exception', duration_ms: 0.4, sequence: 4 }),
    ev(7, 'step_completed', { step: step(3, 'tool', EVIL, { tool_call_id: 'c1', name: 'add' }) }),
    ev(8, 'step_completed', { step: step(4, 'tool', 'Error', { tool_call_id: 'c2', name: 'divide', status: 'error' }) }),
    ev(9, 'metrics', { sequence: 2, step: { total_tokens: 20, ttft_ms: 3.2, tool_ms: 1.6 }, run: RUN.metrics }),
    ev(10, 'step_completed', { step: step(5, 'assistant', `done ${EVIL}`, { superseded: true, metrics: { total_tokens: 22 } }) }),
    ev(11, 'run_completed', { run: RUN })
  ]
};

describe('parseTranscript', () => {
  it('accepts objects and JSON strings', () => {
    expect(parseTranscript(transcript).events).toHaveLength(11);
    expect(parseTranscript(JSON.stringify(transcript)).version).toBe(1);
  });
  it('explains what is wrong', () => {
    expect(() => parseTranscript('{not json')).toThrow(/not valid JSON/);
    expect(() => parseTranscript([])).toThrow(/not a JSON object/);
    expect(() => parseTranscript({ version: 1 })).toThrow(/no "events"/);
    expect(() => parseTranscript({ version: 7, events: [] })).toThrow(/version 7/);
  });
});

describe('metricsLine', () => {
  it('shows tokens a server did not report as unknown, never as 0', () => {
    expect(metricsLine({ model_ms: 12, total_tokens: null })).toContain('tokens unknown');
    const run = metricsLine({ steps: 2, model_calls: 1, tool_calls: 0, total_tokens: null }, true);
    expect(run).toContain('tokens unknown');
    expect(run).not.toContain('0 tokens');
    expect(metricsLine({ model_ms: 12, total_tokens: 9, prompt_tokens: 7, completion_tokens: 2 }))
      .toContain('9 tokens (7 in / 2 out)');
  });
});

describe('foldEvents', () => {
  it('builds steps in order with tool cards', () => {
    const view = foldEvents(parseTranscript(transcript));
    expect(view.steps.map(s => [s.sequence, s.role])).toEqual([[1, 'user'], [2, 'assistant'], [5, 'assistant']]);
    expect(view.steps[1].cards.map(c => [c.name, c.status])).toEqual([['add', 'ok'], ['divide', 'error']]);
    expect(view.steps[1].metrics.tool_ms).toBe(1.6);
    expect(view.steps[2].superseded).toBe(true);
  });
  it('settles the cards of calls a cancelled or interrupted run never finished', () => {
    const cut = (status: string, events: any[]) => foldEvents(parseTranscript({ ...transcript, events,
      run: { ...RUN, status } })).steps[1].cards.map(c => [c.name, c.status]);
    const started = transcript.events.slice(0, 5);  // add finished, divide never did
    expect(cut('cancelled', [...started, ev(6, 'run_cancelled', { run: { ...RUN, status: 'cancelled' } })]))
      .toEqual([['add', 'ok'], ['divide', 'cancelled']]);
    expect(cut('interrupted', started)).toEqual([['add', 'ok'], ['divide', 'interrupted']]);
    expect(cut('running', started)).toEqual([['add', 'ok'], ['divide', 'pending']]);  // still live, not started
  });
});

describe('renderTranscript', () => {
  it('shows a typed answer, null included, only for a run that completed with one', () => {
    const typed = (run: Record<string, any>) => ({ version: 1, run, events: [ev(1, 'run_completed', { run })] });
    const answered = renderTranscript(typed({ ...RUN, output_type: 'Optional[Quote]', output: null }), document);
    expect(answered.querySelector('.agio-output-type')!.textContent).toBe('Output · Optional[Quote]');
    expect(answered.querySelector('.agio-output pre')!.textContent).toBe('null');
    const none = renderTranscript(typed({ ...RUN, output_type: 'Quote' }), document);
    expect(none.querySelector('.agio-output')).toBeNull();
    const cancelled = renderTranscript(typed({ ...RUN, status: 'cancelled', output_type: 'Quote', output: { a: 1 } }),
      document);
    expect(cancelled.querySelector('.agio-output')).toBeNull();
  });
  it('renders header, steps, cards, metrics with the shared class names', () => {
    const node = renderTranscript(transcript, document);
    expect(node.classList.contains('agio-run')).toBe(true);
    expect(node.querySelector('.agio-header .agio-status')!.textContent).toBe('completed');
    expect(node.querySelector('.agio-fork-origin')!.textContent).toContain('forked from session origin99 at step 3');
    expect(node.querySelectorAll('.agio-step-user')).toHaveLength(1);
    expect(node.querySelectorAll('.agio-step-assistant')).toHaveLength(2);
    const cards = node.querySelectorAll('.agio-tool-card');
    expect(cards).toHaveLength(2);
    expect(cards[0].querySelector('.agio-tool-args')!.textContent).toBe('{\n  "a": 1,\n  "b": 2\n}');
    expect(cards[1].querySelector('.agio-tool-error')!.textContent).toContain('ZeroDivisionError');
    expect((cards[1] as HTMLDetailsElement).open).toBe(true);
    expect(node.querySelector('.agio-superseded .agio-text')!.textContent).toContain('done');
    expect(node.querySelector('.agio-metrics')!.textContent).toBe(metricsLine({ ...RUN.metrics, model_calls: 2 }, true));
    expect(node.querySelector('.agio-step-assistant .agio-step-label')!.getAttribute('title')).toContain('TTFT 3 ms');
  });

  it('never turns model or tool text into markup', () => {
    const node = renderTranscript(transcript, document);
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.agio-tool-result')!.textContent).toBe(EVIL);
    expect(node.textContent).toContain('hi <img src=x');
  });

  it('shows a clear inline message for a malformed transcript', () => {
    const node = renderTranscript('{"version": 1, "events": [42]}', document);
    expect(node.classList.contains('agio-invalid')).toBe(true);
    expect(node.textContent).toContain('malformed event');
  });

  it('marks retries', () => {
    const retried = { ...transcript, run: { ...RUN, kind: 'retry', attempt: 2, retry_of: 'first000run' } };
    const node = renderTranscript(retried, document);
    expect(node.querySelector('.agio-attempt')!.textContent).toContain('attempt 2, retry of first000');
    expect(node.querySelector('.agio-header b')!.textContent).toBe('agio Retry');
  });
});

describe('action displays', () => {
  const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
  const TABLE = '<table onclick="window.__pwned=1"><tr><th>a</th></tr><tr><td>1<script>window.__pwned=1</script>' +
    '<img src=x onerror="window.__pwned=1"></td></tr></table>';
  const withAction = {
    ...transcript,
    events: [
      ...transcript.events.slice(0, 4),
      ev(20, 'action_started', { action_id: 'a1', tool_call_id: 'c1', name: 'run_python' }),
      ev(21, 'action_completed', { action_id: 'a1', tool_call_id: 'c1', name: 'run_python', status: 'ok',
        input: { code: '1', isolation: 'bubblewrap' }, output: { displays: [{ mime: 'image/png', data: 'cut…' }] } }),
      ...transcript.events.slice(4, 6),
      ev(22, 'step_completed', { step: step(3, 'tool', 'ok', { tool_call_id: 'c1', name: 'add', extra: { actions: [{
        name: 'run_python', status: 'ok', input: { code: '1', isolation: 'bubblewrap' }, output: {
          displays: [{ mime: 'image/png', data: PNG }, { mime: 'text/html', data: TABLE },
            { mime: 'image/png', data: '" onerror="x' }] } },
        { name: 'write_file', status: 'ok', output: { diff: '--- a/x\n+++ b/x\n+<b>hi</b>\n' } }] } }) }),
      ...transcript.events.slice(7)
    ]
  };

  it('shows figures as images and tables rebuilt from table markup only', () => {
    const node = renderTranscript(withAction, document);
    const imgs = node.querySelectorAll('.agio-displays img');
    expect(imgs).toHaveLength(1);
    expect(imgs[0].getAttribute('src')).toBe(`data:image/png;base64,${PNG}`);
    const table = node.querySelector('.agio-display-html table')!;
    expect(table.querySelector('th')!.textContent).toBe('a');
    expect(table.getAttribute('onclick')).toBeNull();
    expect(node.querySelector('.agio-display-html script')).toBeNull();
    expect(node.querySelector('.agio-display-html img')).toBeNull();
    expect((window as any).__pwned).toBeUndefined();
    expect(node.querySelector('.agio-tool-card summary .agio-isolation')!.textContent).toBe(' · sandbox: bubblewrap');
    expect(node.querySelector('.agio-tool-diff')!.textContent).toBe('--- a/x\n+++ b/x\n+<b>hi</b>\n');
    expect(node.querySelector('.agio-tool-diff b')).toBeNull();
  });
});
