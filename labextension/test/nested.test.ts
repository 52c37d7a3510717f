// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { foldEvents, parseTranscript, renderTranscript } from '../src/render';

const EVIL = '<img src=x onerror="window.__pwned=1">';

function ev(run: string, seq: number, type: string, payload: Record<string, any>) {
  return { type, run_id: run, session_id: `s-${run}`, seq, ts: 0, payload };
}

function asks(run: string, seq: number, callId: string, name: string) {
  return ev(run, seq, 'step_completed', { step: { sequence: 2, role: 'assistant', content: null, tool_calls: [
    { id: callId, type: 'function', function: { name, arguments: '{"query":"q"}' } }] } });
}

const AGENTS: Record<string, string> = { outer: 'writer', mid: 'researcher', inner: 'checker' };

function answers(run: string, seq: number, text: string, status = 'completed') {
  return [
    ev(run, seq, 'step_completed', { step: { sequence: 4, role: 'assistant', content: text, tool_calls: [] } }),
    ev(run, seq + 1, `run_${status}`, { run: { id: run, agent_name: AGENTS[run], status, metrics: { steps: 4 } } })
  ];
}

/** outer -> (c1) mid -> (c2) inner, as the engine streams it: inner events tagged with their path. */
function nestedTranscript() {
  const hop1 = { tool_call_id: 'c1', run_id: 'mid' };
  const hop2 = { tool_call_id: 'c2', run_id: 'inner' };
  const wrap = (path: any[], e: any, seq: number) => ev('outer', seq, 'nested', { path, event: e });
  return {
    version: 1, run: null, session: null,
    events: [
      ev('outer', 1, 'run_started', { run: { id: 'outer', agent_name: 'planner', status: 'running' } }),
      asks('outer', 2, 'c1', 'researcher'),
      wrap([hop1], ev('mid', 1, 'run_started', { run: { id: 'mid', agent_name: 'researcher', status: 'running' } }), 3),
      wrap([hop1], asks('mid', 2, 'c2', 'checker'), 4),
      wrap([hop1, hop2], ev('inner', 1, 'run_started', { run: { id: 'inner', agent_name: 'checker', status: 'running' } }), 5),
      ...answers('inner', 2, `checked ${EVIL}`).map((e, i) => wrap([hop1, hop2], e, 6 + i)),
      ...answers('mid', 3, 'researched').map((e, i) => wrap([hop1], e, 8 + i)),
      ev('outer', 10, 'tool_call_completed', { tool_call_id: 'c1', name: 'researcher', content: 'researched' }),
      ev('outer', 11, 'handoff', { from: 'planner', to: 'writer', tool_call_id: 'c9' }),
      ...answers('outer', 12, 'done')
    ]
  };
}

describe('nested runs', () => {
  it('folds each nested event into the card of the call that started it, at any depth', () => {
    const view = foldEvents(parseTranscript(nestedTranscript()));
    const card = view.steps[0].cards[0];
    expect(card.name).toBe('researcher');
    expect(card.nested?.length).toBe(7);
    const mid = foldEvents({ version: 1, run: null, session: null, events: card.nested! });
    expect(mid.run.agent_name).toBe('researcher');
    expect(mid.steps[0].cards[0].nested?.length).toBe(3);
    expect(view.handoffs).toEqual([{ from: 'planner', to: 'writer' }]);
  });

  it('renders the nesting inside the tool cards, escaped', () => {
    (window as any).__pwned = 0;
    const root = renderTranscript(nestedTranscript(), document);
    const nested = root.querySelectorAll('.agio-tool-card .agio-nested-run');
    expect(nested.length).toBe(2);
    const agents = Array.from(root.querySelectorAll('.agio-nested-agent')).map(n => n.textContent);
    expect(agents).toEqual(['researcher', 'checker']);
    const inner = nested[1];
    expect(inner.closest('.agio-nested-run')).toBe(inner);
    expect(nested[0].contains(inner)).toBe(true);
    expect(inner.textContent).toContain(`checked ${EVIL}`);
    expect(root.querySelector('img')).toBeNull();
    expect(root.querySelector('.agio-handoff')?.textContent).toBe('handed off: planner → writer');
  });
});

describe('a nested run whose end never reached the stream', () => {
  it('ends with the outer run, its running cards too', () => {
    const hop = { tool_call_id: 'c1', run_id: 'mid' };
    const t = {
      version: 1, run: null, session: null,
      events: [
        ev('outer', 1, 'run_started', { run: { id: 'outer', agent_name: 'planner', status: 'running' } }),
        asks('outer', 2, 'c1', 'researcher'),
        ev('outer', 3, 'nested', { path: [hop], event: ev('mid', 1, 'run_started', { run: { id: 'mid', agent_name: 'researcher', status: 'running' } }) }),
        ev('outer', 4, 'nested', { path: [hop], event: asks('mid', 2, 'c2', 'nap') }),
        ev('outer', 5, 'run_cancelled', { run: { id: 'outer', agent_name: 'planner', status: 'cancelled' } })
      ]
    };
    const root = renderTranscript(t, document);
    const box = root.querySelector('.agio-nested-run')!;
    expect(box.querySelector('.agio-status')?.textContent).toBe('cancelled');
    expect(box.querySelector('.agio-tool-card .agio-status')?.textContent).toBe('cancelled');
  });
});
