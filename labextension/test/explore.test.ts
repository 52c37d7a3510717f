// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { formatCost, renderDiff, renderTree } from '../src/explore';
import { MAGIC_EVENT } from '../src/magic';
import { renderTranscript } from '../src/render';

const EVIL = '<img src=x onerror="window.__pwned=1">';

const side = (sequence: number, role: string, text: string, extra: Record<string, any> = {}) => ({
  sequence, role, status: 'ok', attempt: 1, text, tokens: 10, latency_ms: 5, cost: role === 'assistant' ? 0.001 : null,
  tool_calls: [], ...extra
});

const diffData = {
  version: 1,
  a: { label: `run A ${EVIL}`, tokens: 10, latency_ms: 5, cost: 0.001 },
  b: { label: 'run B', tokens: 12, latency_ms: 6, cost: null },
  delta: { tokens: 2, latency_ms: 1, cost: null },
  rows: [
    { status: 'same', a: side(1, 'user', 'hi'), b: side(1, 'user', 'hi'), text_a: [['equal', 'hi']],
      text_b: [['equal', 'hi']], arguments: [], result_changed: false },
    { status: 'changed', a: side(2, 'assistant', `x ${EVIL}`), b: side(2, 'assistant', 'x y'),
      text_a: [['equal', 'x '], ['delete', EVIL]], text_b: [['equal', 'x '], ['insert', 'y']],
      arguments: [{ tool: 'weather', name: 'city', a: 'Paris', b: 'Oslo' }], result_changed: false, tokens_delta: 2 },
    { status: 'only_b', a: null, b: side(3, 'assistant', 'more'), text_a: [], text_b: [['insert', 'more']],
      arguments: [], result_changed: false }
  ]
};

describe('renderDiff', () => {
  it('draws aligned pairs with highlights, argument changes and unknown costs, as text only', () => {
    const node = renderDiff(diffData, document);
    expect(node.querySelectorAll('.agio-diff-row').length).toBe(3);
    expect(node.querySelectorAll('.agio-diff-changed').length).toBe(1);
    expect(node.querySelector('.agio-diff-delete')!.textContent).toBe(EVIL);
    expect(node.querySelector('img')).toBeNull();
    expect(node.textContent).toContain('weather.city: "Paris" → "Oslo"');
    expect(node.textContent).toContain('cost $0.0010 → unknown');
  });

  it('shows where the setups differ: the system prompt word by word, settings as values', () => {
    const data = {
      ...diffData,
      setup: [{ name: 'system prompt', a: 'Be brief.', b: `Be ${EVIL}`, text_a: [['equal', 'Be '], ['delete', 'brief.']],
                text_b: [['equal', 'Be '], ['insert', EVIL]] },
              { name: 'settings.temperature', a: 0, b: 0.7 }],
      rows: [{ ...diffData.rows[1], setup: [{ name: 'system prompt', a: 'x', b: 'y' }, { name: 'model', a: 'm1', b: 'm2' }] }]
    };
    const node = renderDiff(data, document);
    const setup = node.querySelector('.agio-diff-setup')!;
    expect(setup.querySelector('.agio-diff-insert')!.textContent).toBe(EVIL);
    expect(node.querySelector('img')).toBeNull();
    expect(setup.textContent).toContain('settings.temperature: 0 → 0.7');
    expect(node.querySelector('.agio-diff-changes')!.textContent).toContain('system prompt differs · model: "m1" → "m2"');
    expect(renderDiff(diffData, document).querySelector('.agio-diff-setup')).toBeNull();
  });

  it('says what is wrong with bad data', () => {
    expect(renderDiff({ version: 9 }, document).textContent).toBe('Cannot show this agio diff: unsupported diff');
  });
});

describe('renderTree', () => {
  const run = (id: string, current: boolean, children: any[] = []) => ({
    kind: 'run', id, run_kind: 'run', status: 'completed', attempt: 1, current, query: EVIL, model: 'm', tokens: 5,
    start_sequence: 2,
    latency_ms: 9, cost: null, timeline: [{ kind: 'model', ms: 3, label: 'model #2' }, { kind: 'tool', ms: 1, label: 't' }],
    transcript: [{ sequence: 1, role: 'user', text: EVIL }], children
  });
  const data = { version: 1, session_id: 'sess0001', scale: { tokens: 5, latency_ms: 9 },
    root: { kind: 'session', id: 'sess0001', forked_from: null, children: [run('r1', false, [run('r2', true)])] } };

  it('nests retries, marks the current attempt and keeps transcripts behind a click', () => {
    const node = renderTree(data, document);
    expect(node.querySelectorAll('.agio-tree-run').length).toBe(2);
    expect(node.querySelectorAll('.agio-tree-current').length).toBe(1);
    expect(node.querySelector('.agio-tree-run .agio-tree-run')!.getAttribute('data-run')).toBe('r2');
    expect(node.querySelectorAll('.agio-phase').length).toBe(4);
    // the colours are explained: the timeline's phases and the two bars
    const legend = node.querySelector('.agio-tree-legend')!;
    expect(legend.textContent).toContain('model');
    expect(legend.textContent).toContain('tokens');
    expect(legend.querySelectorAll('.agio-legend-tool, .agio-legend-latency').length).toBe(2);
    expect(legend.querySelectorAll('.agio-phase, .agio-tree-bar').length).toBe(0); // swatches, not data
    expect((node.querySelector('details') as HTMLDetailsElement).open).toBe(false);
    expect(node.querySelector('.agio-tree-transcript')!.textContent).toContain(EVIL);
    expect(node.querySelector('img')).toBeNull();
    expect(node.textContent).toContain('unknown');
  });

  it('a node asks the notebook to open its transcript, or to make a superseded attempt current', () => {
    const node = renderTree(data, document);
    document.body.append(node);
    const asked: string[] = [];
    const listener = (e: Event) => {
      asked.push((e as CustomEvent).detail.code);
      e.preventDefault();
    };
    document.addEventListener(MAGIC_EVENT, listener);
    const first = node.querySelector('.agio-tree-run') as HTMLElement;
    (first.querySelector('.agio-tree-open') as HTMLButtonElement).click();
    (first.querySelector('.agio-tree-use-attempt') as HTMLButtonElement).click();
    document.removeEventListener(MAGIC_EVENT, listener);
    expect(asked).toEqual(['%agio replay r1', '%agio use-attempt r1 1']);
    // the current attempt has nothing to switch to
    expect(node.querySelectorAll('.agio-tree-use-attempt').length).toBe(1);
    node.remove();
  });
});

describe('costs', () => {
  it('unknown is unknown, never $0', () => {
    expect(formatCost(null)).toBe('unknown');
    expect(formatCost(0)).toBe('$0');
    expect(formatCost(0.0123)).toBe('$0.0123');
  });

  it('the transcript footer shows the run cost and a replayed badge', () => {
    const r = { id: 'r1', session_id: 's1', status: 'budget_exceeded', kind: 'run', attempt: 1,
      metrics: { steps: 2, tool_calls: 1, total_tokens: 4, cost: null } };
    const node = renderTranscript({ version: 1, run: r, session: null, events: [
      { type: 'step_completed', run_id: 'r1', session_id: 's1', seq: 1, ts: 0, payload: { step: {
        sequence: 2, role: 'assistant', content: null, status: 'ok', attempt: 1, superseded: false, metrics: {},
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'send', arguments: '{}' } }] } } },
      { type: 'tool_call_completed', run_id: 'r1', session_id: 's1', seq: 2, ts: 0,
        payload: { tool_call_id: 'c1', name: 'send', content: 'ok', replayed: true } },
      { type: 'run_budget_exceeded', run_id: 'r1', session_id: 's1', seq: 3, ts: 0, payload: { run: r } }] }, document);
    const footers = [...node.querySelectorAll('.agio-metrics')].map(n => n.textContent ?? '');
    expect(footers[footers.length - 1]).toContain('cost unknown');
    expect(node.querySelector('.agio-replayed')!.textContent).toBe('replayed');
  });
});
