// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { renderTranscript } from '../src/render';

const EVIL = '<img src=x onerror="window.__pwned=1">';
const RUN = { id: 'run00001aaaa', session_id: 'sess0001bbbb', status: 'completed', kind: 'run', attempt: 1, metrics: {} };

function ev(seq: number, type: string, payload: Record<string, any>) {
  return { type, run_id: RUN.id, session_id: RUN.session_id, seq, ts: 0, payload };
}

const memory = {
  sequence: 2, step_id: 'm1', mode: 'bm25', query: 'q', scope: 'tutor', text: `## Memory\n- ${EVIL}`,
  items: [{ kind: 'skill', id: 'skill0001xyz', name: 'units', text: EVIL },
    { kind: 'experience', id: 'exp00001xyz', situation: 'speed of light', lesson: 'use km/s' }]
};

const transcript = {
  version: 1, run: RUN, session: null,
  trace_svg: '<svg xmlns="http://www.w3.org/2000/svg"><text>#1 user: hi &lt;b&gt;</text></svg>',
  events: [
    ev(1, 'step_completed', { step: { sequence: 1, role: 'user', content: 'hi', metrics: {}, tool_calls: [] } }),
    ev(2, 'step_completed', { step: { sequence: 2, role: 'system', content: `## Memory\n- ${EVIL}`, metrics: {},
      tool_calls: [], extra: { kind: 'memory_read' } } }),
    ev(3, 'memory_read', memory),
    ev(4, 'step_completed', { step: { sequence: 3, role: 'assistant', content: 'km/s', metrics: {}, tool_calls: [] } })
  ]
};

describe('memory and trace in a saved transcript', () => {
  it('shows the memory_read step as a collapsed card listing what went in, as text only', () => {
    const root = renderTranscript(transcript, document);
    const card = root.querySelector('.agio-step-memory details.agio-memory-card') as HTMLDetailsElement;
    expect(card).not.toBeNull();
    expect(card.open).toBe(false);
    expect(card.querySelector('summary')!.textContent).toContain('1 skill, 1 experience · bm25');
    expect([...card.querySelectorAll('li')].map(li => li.textContent)).toEqual([
      `skill units: ${EVIL} skill000`, 'experience speed of light — use km/s exp00001']);
    expect(card.querySelector('pre.agio-memory-text')!.textContent).toBe(`## Memory\n- ${EVIL}`);
    expect(root.querySelector('img[src="x"]')).toBeNull();
    expect(root.querySelector('.agio-step-memory .agio-step-label')!.textContent).toContain('#2 Memory');
    expect(root.querySelector('.agio-step-memory .agio-text')).toBeNull();
  });

  it('draws the trace graph through an image, never as live markup', () => {
    const root = renderTranscript(transcript, document);
    const details = root.querySelector('details.agio-trace') as HTMLDetailsElement;
    expect(details.querySelector('img')).toBeNull(); // nothing drawn until it is opened
    details.open = true;
    details.dispatchEvent(new Event('toggle'));
    const img = details.querySelector('img.agio-trace-image') as HTMLImageElement;
    expect(img.src.startsWith('data:image/svg+xml;base64,')).toBe(true);
    const svg = new TextDecoder().decode(Uint8Array.from(atob(img.src.split(',')[1]), c => c.charCodeAt(0)));
    expect(svg).toBe(transcript.trace_svg);
    expect(root.querySelector('svg:not(.agio-icon)')).toBeNull(); // only the extension's own icons are inline SVG
  });

  it('leaves the trace out when the transcript has none', () => {
    const root = renderTranscript({ ...transcript, trace_svg: undefined }, document);
    expect(root.querySelector('.agio-trace')).toBeNull();
  });
});

describe('feedback buttons', () => {
  it('ask the notebook to run %agio feedback for this run, or show the command', () => {
    const root = renderTranscript({ ...transcript, run: { ...RUN, status: 'completed' } }, document);
    document.body.append(root);
    const asked: string[] = [];
    const handler = (e: Event) => {
      asked.push((e as CustomEvent).detail.code);
      e.preventDefault();
    };
    document.body.addEventListener('agio-run-magic', handler);
    (root.querySelector('.agio-feedback .agio-thumb-up') as HTMLButtonElement).click();
    (root.querySelector('.agio-feedback .agio-thumb-down') as HTMLButtonElement).click();
    expect(asked).toEqual(['%agio feedback run00001 +1', '%agio feedback run00001 -1']);
    document.body.removeEventListener('agio-run-magic', handler);
    (root.querySelector('.agio-feedback .agio-thumb-down') as HTMLButtonElement).click();
    expect(root.querySelector('.agio-feedback .agio-command-hint')!.textContent)
      .toBe('run in a cell: %agio feedback run00001 -1');
    root.remove();
  });

  it('are left out for a running run or an unsafe id', () => {
    expect(renderTranscript({ ...transcript, run: { ...RUN, status: 'running' } }, document)
      .querySelector('.agio-feedback')).toBeNull();
    expect(renderTranscript({ ...transcript, run: { ...RUN, id: 'x; $(rm)' } }, document)
      .querySelector('.agio-feedback')).toBeNull();
  });
});
