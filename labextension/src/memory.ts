/**
 * Memory and the trace graph in a saved transcript: the memory_read card (what was retrieved into
 * the prompt) and the run's trace drawing.
 *
 * Retrieved text is untrusted (it may come from model output turned into experience): it reaches the
 * DOM through textContent only. The trace drawing is Graphviz SVG shown through an <img>, which
 * never runs script, whatever the labels say.
 */

import { el } from './dom';
import { icon } from './icons';
import { magicButton, shortArg } from './magic';
import { counted } from './words';

export interface MemoryItem {
  kind: string;
  id: string;
  name?: string;
  text?: string;
  situation?: string;
  lesson?: string;
}

/** The memory_read card, collapsed: a line per item, then the exact text added to the system prompt. */
export function renderMemoryCard(doc: Document, memory: Record<string, any>): HTMLElement {
  const items: MemoryItem[] = Array.isArray(memory.items) ? memory.items : [];
  const skills = items.filter(i => i.kind === 'skill').length;
  const details = el(doc, 'details', ['agio-memory-card']);
  details.append(el(doc, 'summary', [],
    `Memory · ${counted(skills, 'skill')}, ${counted(items.length - skills, 'experience')} · ${String(memory.mode ?? '')}`));
  const list = el(doc, 'ul');
  for (const item of items) {
    const kind = String(item.kind ?? '');
    const body = kind === 'skill'
      ? `${item.name ?? ''}: ${item.text ?? ''}`
      : `${item.situation ?? ''} — ${item.lesson ?? ''}`;
    const li = el(doc, 'li', ['agio-memory-item', `agio-memory-${kind.replace(/[^a-z]/g, '')}`]);
    li.append(el(doc, 'b', [], kind), ` ${body} `, el(doc, 'span', ['agio-memory-id'], String(item.id ?? '').slice(0, 8)));
    list.append(li);
  }
  details.append(list, el(doc, 'div', ['agio-label'], 'added to the system prompt'));
  details.append(el(doc, 'pre', ['agio-memory-text'], String(memory.text ?? '')));
  return details;
}

/**
 * The run's trace graph (from the transcript's `trace_svg`), collapsed; null when there is none.
 * The image is made when the section is first opened, so a closed transcript holds no <img>.
 */
export function renderTrace(doc: Document, svg: unknown): HTMLElement | null {
  if (typeof svg !== 'string' || !svg.startsWith('<svg')) {
    return null;
  }
  const details = el(doc, 'details', ['agio-trace']) as HTMLDetailsElement;
  details.append(el(doc, 'summary', [], 'Trace graph'));
  details.addEventListener('toggle', () => {
    if (!details.open || details.querySelector('img')) {
      return;
    }
    const img = doc.createElement('img');
    img.alt = 'trace graph of this run';
    img.classList.add('agio-trace-image');
    const bytes = new TextEncoder().encode(svg);
    let binary = '';
    bytes.forEach(b => (binary += String.fromCharCode(b)));
    img.src = `data:image/svg+xml;base64,${btoa(binary)}`;
    details.append(img);
  });
  return details;
}

export function feedbackCommand(runId: string, rating: '+1' | '-1'): string {
  return `%agio feedback ${runId} ${rating}`;
}

/**
 * Thumbs up / down under a finished run: like the other controls (magic.ts), a click inserts and runs
 * `%agio feedback RUN +1|-1` below (add a comment in that cell and run it again to say why); with no
 * notebook to ask, the command is shown to copy.
 */
export function renderFeedback(doc: Document, runId: unknown): HTMLElement | null {
  const id = shortArg(runId);
  if (id === null) {
    return null;
  }
  const bar = el(doc, 'div', ['agio-feedback']);
  bar.append(el(doc, 'span', ['agio-label'], 'Feedback:'));
  const up = magicButton(doc, 'Good +1', () => feedbackCommand(id, '+1'), ['agio-thumb-up']);
  const down = magicButton(doc, 'Wrong -1', () => feedbackCommand(id, '-1'), ['agio-thumb-down']);
  up.prepend(icon(doc, 'thumb-up'), ' ');
  down.prepend(icon(doc, 'thumb-down'), ' ');
  up.title = 'this run was good: stores +1 and proposes an experience';
  down.title = 'this run was wrong: stores -1 and proposes an experience';
  up.setAttribute('aria-label', 'Feedback: this run was good (+1)');
  down.setAttribute('aria-label', 'Feedback: this run was wrong (-1)');
  bar.append(up, down);
  return bar;
}
