// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { renderBatch, renderPlan, renderSweep, renderTrace } from '../src/views';

const EVIL = '<img src=x onerror="window.__pwned=1">';

const cancelled = {
  name: `eval ${EVIL}`, status: 'cancelled', total: 40, done: 40, completed: 6, failed: 1, timed_out: 0, cancelled: 33,
  running: 0, queued: 0, throughput_per_s: 9.1, completed_per_s: 1.2, elapsed_s: 5, error_rate: 1 / 7, tokens: 1200,
  cost: null, avg_ms: 150, last_errors: [{ item: 3, error: EVIL }],
  histogram: [{ start_ms: 108, end_ms: 172, count: 24 }, { start_ms: 172, end_ms: 237, count: 13 }]
};

describe('renderBatch', () => {
  it('tells the truth after Cancel: state, counts by status, completed/s, unknown cost', () => {
    const node = renderBatch(cancelled, document);
    const text = node.textContent!;
    expect(text).toContain('cancelled · 6/40 completed');
    expect(text).toContain('6 completed · 1 failed · 33 cancelled');
    expect(text).toContain('1.20 completed/s');
    expect(text).not.toContain('9.10');
    expect(text).toContain('cost unknown');
    expect(node.querySelector('.agio-batch-bar-completed')!.getAttribute('style')).toContain('width: 15%');
    expect(node.querySelector('.agio-batch-bar-cancelled')!.getAttribute('style')).toContain('width: 82.5%');
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.agio-batch-errors')!.textContent).toContain(EVIL);
  });

  it('draws the histogram as bars with ranges in titles, never as run-on text', () => {
    const node = renderBatch(cancelled, document);
    const bins = node.querySelectorAll('.agio-batch-bin');
    expect(bins.length).toBe(2);
    expect((bins[0] as HTMLElement).title).toBe('108 to 172 ms: 24 item(s)');
    expect(node.querySelector('.agio-batch-hist')!.textContent).toBe('latencyfrom 108 ms to 237 ms');
  });

  it('says "so far" while a priced batch is unfinished, and reads older bundles', () => {
    const { completed_per_s: _, ...old } = { ...cancelled, cost: 0.0123 };
    const text = renderBatch(old, document).textContent!;
    expect(text).toContain('cost $0.0123 so far');
    expect(text).toContain('1.20 completed/s'); // 6 completed in 5 s
  });

  it('shows one line for a bundle it cannot read', () => {
    expect(renderBatch('not json', document).textContent).toMatch(/^agio: cannot show this batch/);
  });
});

const layout = {
  width: 200, height: 120,
  nodes: { a: { x: 40, y: 20, w: 60, h: 30 }, [EVIL]: { x: 140, y: 90, w: 80, h: 30 } },
  edges: [{ tail: 'a', head: EVIL, points: [[50, 35], [70, 50], [110, 60], [130, 70]], arrow: [135, 75] }]
};

describe('renderPlan and renderTrace', () => {
  it('draws the plan from its layout with states, names as text', () => {
    const node = renderPlan({
      name: 'p', status: 'failed', failed_task: EVIL, error: 'boom', layout,
      tasks: [{ name: 'a', depends_on: [] }, { name: EVIL, depends_on: ['a'] }],
      states: { a: { status: 'completed', attempts: 1 }, [EVIL]: { status: 'failed', attempts: 2 } }
    }, document);
    expect(node.querySelectorAll('svg .agio-graph-node').length).toBe(2);
    expect(node.querySelectorAll('svg path').length).toBe(1);
    expect(node.querySelector('.agio-task-failed')!.textContent).toContain(`${EVIL}failed (attempt 2)`);
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.agio-plan-error')!.textContent).toBe(`task ${EVIL} failed: boom`);
  });

  it('lists the tasks when there is no layout', () => {
    const node = renderPlan({ name: 'p', status: 'completed', layout: null, tasks: [{ name: 'a', depends_on: [] }],
      states: { a: { status: 'completed' } } }, document);
    expect(node.querySelector('svg')).toBeNull();
    expect(node.querySelector('.agio-task-completed')!.textContent).toBe('completed a');
  });

  it('draws the trace with a box per step, coloured by kind, dashed when superseded', () => {
    const node = renderTrace({
      run_id: '2a6b791dd5814c5e', edges: [['a', EVIL]], layout,
      nodes: [{ id: 'a', kind: 'user', label: '#1 user: hi', superseded: false },
        { id: EVIL, kind: 'model', label: `#2 model: ${EVIL}`, superseded: true }]
    }, document);
    expect(node.textContent).toContain('trace of run 2a6b791d · 2 steps, 1 edge');
    expect(node.querySelectorAll('.agio-node-user, .agio-node-model').length).toBe(2);
    expect(node.querySelector('.agio-node-model rect')!.getAttribute('stroke-dasharray')).toBe('4 3');
    expect(node.querySelector('.agio-node-model text')!.textContent).toBe(`#2 model: ${EVIL}`);
    expect(node.querySelector('img')).toBeNull();
    expect(node.textContent).not.toContain('<agio trace');
  });

  it('draws a nested run as a box named after its agent, behind its steps; a malformed box is left out', () => {
    const boxed = { ...layout, clusters: [{ label: `agent ${EVIL}`, x: 2, y: 3, w: 50, h: 40 },
      { label: 'broken', x: 'x', y: 0, w: 1, h: 1 }] };
    const node = renderTrace({ run_id: 'r', edges: [], layout: boxed,
      nodes: [{ id: 'a', kind: 'user', label: '#1 user: hi' }, { id: EVIL, kind: 'model', label: '#2 researcher: x' }] },
    document);
    const boxes = node.querySelectorAll('svg .agio-graph-cluster');
    expect(boxes.length).toBe(1);
    expect(boxes[0].querySelector('text')!.textContent).toBe(`agent ${EVIL}`);
    expect(boxes[0].querySelector('rect')!.getAttribute('stroke-dasharray')).toBe('4 3');
    const svg = node.querySelector('svg')!;
    expect(svg.firstElementChild!.classList.contains('agio-graph-cluster')).toBe(true); // drawn first: behind
    expect(node.querySelector('img')).toBeNull();
  });
});

describe('renderSweep', () => {
  it('shows means, intervals, the interval method and dollar amounts as text', () => {
    const node = renderSweep({
      source: 'abcdef0123', at: 3, runs: 4, axes: ['model'], scores: ['ok'], metrics: ['cost'],
      methods: { ok: 'Wilson', cost: "Student's t" },
      variants: [
        { labels: { model: EVIL }, runs: 2, completed: 2, values: { ok: { mean: 1, low: 0.34, high: 1 }, cost: { mean: 0.002, low: 0.001, high: 0.003 } } },
        { labels: { model: 'b' }, runs: 2, completed: 1, values: { ok: { mean: 0.5, low: 0.09, high: 0.91 }, cost: { mean: null, low: null, high: null } } }
      ]
    }, document);
    const rows = node.querySelectorAll('.agio-sweep-variant');
    expect(rows.length).toBe(2);
    expect(node.querySelector('th')!.parentElement!.textContent).toBe("modelrunsok95% Wilsoncost95% Student's t");
    expect(rows[0].textContent).toBe(`${EVIL}2/21.00 [0.34, 1.00]$0.0020 [$0.0010, $0.0030]`);
    expect(rows[1].textContent).toContain('unknown');
    expect(rows[0].querySelectorAll('.agio-sweep-best').length).toBe(2);
    expect(node.querySelector('img')).toBeNull();
  });
});
