/**
 * Step mode in the transcript: where a run paused, what was edited, and "What the model saw" under each
 * model call; and the keys of a live pause view. Drawn from the transcript's own data (its run_paused /
 * run_resumed events, the stored steps' `edited` records, and `seen`), text through textContent only.
 */

import { el } from './dom';
import { icon } from './icons';
import type { AgioEvent, SeenRow, SeenTotal, Transcript } from './transcript';
import { counted, seconds } from './words';

const PLACES: Record<string, (name: string) => string> = {
  model: () => 'before the model call',
  reply: () => "after the model's reply",
  tool: name => `before tool call ${name}`,
  result: name => `after the result of ${name}`
};

function pauseLine(p: Record<string, any>): string {
  const place = (PLACES[String(p.kind)] ?? (() => String(p.kind)))(String(p.name ?? ''));
  const took = typeof p.paused_ms === 'number' ? `, ${seconds(p.paused_ms)}` : '';
  const edited = Array.isArray(p.edited) && p.edited.length ? ` · edited ${p.edited.join(', ')}` : '';
  return `paused ${place} (step ${p.sequence}) → ${p.action ?? 'ended here'}${took}${edited}`;
}

/** A pause of the run, marked with the pause icon (drawn, like the others: no emoji font needed). */
function pauseMark(doc: Document, p: Record<string, any>): HTMLElement {
  const mark = el(doc, 'div', ['agio-pause-mark'], pauseLine(p));
  mark.prepend(icon(doc, 'pause'), ' ');
  return mark;
}

/** The pauses of a run: each resumed one, and a pause the run ended at (no run_resumed after it). */
function pauses(events: AgioEvent[]): Record<string, any>[] {
  const out: Record<string, any>[] = [];
  let open: Record<string, any> | null = null;
  for (const e of events) {
    if (e.type === 'run_paused') {
      open = e.payload;
    } else if (e.type === 'run_resumed') {
      out.push(e.payload);
      open = null;
    }
  }
  if (open) {
    out.push({ ...open, action: undefined });
  }
  return out;
}

function storedStep(events: AgioEvent[], match: (step: Record<string, any>) => boolean): Record<string, any> | null {
  let found: Record<string, any> | null = null;
  for (const e of events) {
    if (e.type === 'step_completed' && e.payload.step && match(e.payload.step)) {
      found = e.payload.step;
    }
  }
  return found;
}

function editedTitle(edited: Record<string, any>): string {
  return Object.entries(edited)
    .map(([key, value]) => {
      if (key === 'request') {
        return `request: ${(value?.fields ?? []).join(', ')}`;
      }
      if (key === 'skipped') {
        return 'skipped: the result was typed by hand';
      }
      const proposed = value?.proposed;
      return proposed === undefined ? key : `${key}: proposed ${typeof proposed === 'string' ? proposed : JSON.stringify(proposed)}`;
    })
    .join('; ');
}

function editedBadge(doc: Document, edited: Record<string, any>): HTMLElement {
  const badge = el(doc, 'span', ['agio-edited'], 'edited');
  badge.title = editedTitle(edited);
  return badge;
}

/** "What the model saw": a disclosure with one row per message (role, tokens, the step it came from). */
/** The disclosure's line, as notebook/debug_marks.py:seen_summary writes it. */
export function seenSummary(rows: SeenRow[], total?: SeenTotal | null): string {
  const t = total ?? {
    prompt_tokens: rows.reduce((sum, r) => sum + (Number(r.tokens) || 0), 0),
    estimated: rows.some(r => r.tokens_estimated), reported: null, differs: false
  };
  let line = `What the model saw · ${counted(rows.length, 'message')} · ` +
    `${t.estimated ? '~' : ''}${t.prompt_tokens} tokens${t.estimated ? ' (estimated)' : ''}`;
  if (t.differs) {
    line += ` · the model reported ${t.reported}`;
  }
  return line;
}

export function renderSeen(doc: Document, rows: SeenRow[], total?: SeenTotal | null): HTMLElement {
  const details = el(doc, 'details', ['agio-seen']);
  details.append(el(doc, 'summary', [], seenSummary(rows, total)));
  const table = el(doc, 'table', ['agio-seen-table']);
  for (const r of rows) {
    const tr = el(doc, 'tr', r.edited ? ['agio-seen-row', 'agio-seen-edited'] : ['agio-seen-row']);
    tr.append(el(doc, 'td', ['agio-seen-role'], String(r.role)));
    tr.append(el(doc, 'td', ['agio-seen-tokens'], `${r.tokens_estimated ? '~' : ''}${Number(r.tokens) || 0}`));
    tr.append(el(doc, 'td', ['agio-seen-step'], `${r.step !== null && r.step !== undefined ? '#' + r.step : ''}${r.edited ? ' edited' : ''}`));
    const text = el(doc, 'td');
    text.append(el(doc, 'pre', ['agio-seen-text'], String(r.text ?? '')));
    tr.append(text);
    table.append(tr);
  }
  details.append(table);
  return details;
}

function seenRows(t: Transcript, sequence: number): SeenRow[] | null {
  const seen = t.seen;
  const positions = seen?.calls?.[String(sequence)];
  if (!seen || !Array.isArray(positions) || !Array.isArray(seen.messages)) {
    return null;
  }
  return positions.map(i => seen.messages[i]).filter(r => r && typeof r === 'object');
}

/** Under a model step: its pauses, an "edited" badge with what was proposed, and what the model saw. */
export function renderStepDebug(doc: Document, t: Transcript, sequence: number, role: string): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (role !== 'assistant') {
    return out;
  }
  const stored = storedStep(t.events, s => s.sequence === sequence && s.role === 'assistant');
  const extra = stored?.extra ?? {};
  const edited: Record<string, any> = { ...(extra.edited ?? {}) };
  if (extra.request?.edited) {
    edited.request = extra.request.edited;
  }
  if (Object.keys(edited).length) {
    out.push(editedBadge(doc, edited));
  }
  for (const p of pauses(t.events)) {
    if (p.sequence === sequence && !p.tool_call_id) {
      out.push(pauseMark(doc, p));
    }
  }
  const rows = seenRows(t, sequence);
  if (rows && rows.length) {
    out.push(renderSeen(doc, rows, t.seen?.totals?.[String(sequence)]));
  }
  return out;
}

/** Under a tool card: its pauses, and what was edited (arguments it ran with, the result as given). */
export function renderCardDebug(doc: Document, t: Transcript, toolCallId: string): HTMLElement[] {
  const out: HTMLElement[] = [];
  const stored = storedStep(t.events, s => s.role === 'tool' && s.tool_call_id === toolCallId);
  const edited = stored?.extra?.edited;
  if (edited && typeof edited === 'object') {
    const box = el(doc, 'div', ['agio-card-edits']);
    box.append(editedBadge(doc, edited));
    if (edited.arguments) {
      box.append(el(doc, 'div', ['agio-label'], 'ran with'), el(doc, 'pre', ['agio-edited-args'], String(edited.arguments.sent)));
    }
    if (edited.result || edited.skipped) {
      box.append(el(doc, 'div', ['agio-label'], edited.skipped ? 'result typed by hand' : 'result as edited'),
        el(doc, 'pre', ['agio-edited-result'], String(stored?.content ?? '')));
    }
    out.push(box);
  }
  for (const p of pauses(t.events)) {
    if (p.tool_call_id === toolCallId) {
      out.push(pauseMark(doc, p));
    }
  }
  return out;
}

const KEYS: Record<string, string> = { c: 'continue', s: 'step', e: 'edit', k: 'skip', a: 'abort' };

/**
 * Keys of a live pause view (c, s, e, k, a): while focus is inside `.agio-pause` but not in one of its
 * editors, a key clicks the matching button, before JupyterLab's own command-mode shortcuts see it.
 */
export function pauseKey(event: KeyboardEvent): boolean {
  const target = event.target as HTMLElement | null;
  const view = target?.closest?.('.agio-pause');
  if (!view || event.ctrlKey || event.metaKey || event.altKey || target?.closest('textarea, input')) {
    return false;
  }
  const name = KEYS[event.key.toLowerCase()];
  const button = name ? (view.querySelector(`.agio-pause-${name}`) as HTMLButtonElement | null) : null;
  if (!button || button.disabled) {
    return false;
  }
  event.preventDefault();
  event.stopPropagation();
  button.click();
  return true;
}

/** Run once `title` has been painted (the browser's Element Timing for it), or after `limit` ms where
 * that cannot be seen. A focus makes the browser lay the whole page out at once and JupyterLab answer
 * the focus change: done as the view is inserted, or one frame later, it held the page's first pause
 * view back by some 15 ms when that frame did not paint the view yet. */
function afterPainted(doc: Document, title: Element | null, run: () => void, limit = 300): void {
  const win = doc.defaultView;
  if (!win) {
    run();
    return;
  }
  let done = false;
  let observer: PerformanceObserver | null = null;
  const finish = (): void => {
    if (!done) {
      done = true;
      observer?.disconnect();
      win.setTimeout(run, 0);
    }
  };
  win.setTimeout(finish, limit);
  if (title && PerformanceObserver.supportedEntryTypes?.includes('element')) {
    observer = new PerformanceObserver(list => {
      if (list.getEntries().some(entry => (entry as PerformanceEntry & { element?: Element }).element === title)) {
        finish();
      }
    });
    observer.observe({ type: 'element', buffered: true });
  }
}

/** Whether a pause view may take the focus now: not from someone typing (a cell's editor, any text
 * field or editable element), whose next keys would otherwise go to the view's buttons. */
export function mayTakeFocus(doc: Document): boolean {
  const active = doc.activeElement as HTMLElement | null;
  if (!active || active === doc.body) {
    return true;
  }
  return !(active.isContentEditable || active.closest('input, textarea, select, [contenteditable="true"], .cm-editor'));
}

/** The pause views' keys, and a request for focus (Continue) once a view is painted, unless someone is
 * typing: JupyterLab may keep focus on the cell, and then Tab (or a click on a button) brings the keys
 * to the view. */
export function watchPauses(doc: Document): void {
  doc.addEventListener('keydown', event => void pauseKey(event), true);
  new MutationObserver(records => {
    for (const record of records) {
      for (const node of Array.from(record.addedNodes)) {
        // the view's box may be attached before or after its buttons are rendered into it
        const button = node instanceof HTMLElement
          ? (node.matches('.agio-pause-continue') ? node : node.querySelector('.agio-pause-continue'))
          : null;
        const view = button instanceof HTMLElement ? button.closest('.agio-pause') : null;
        if (view && button instanceof HTMLElement) {
          afterPainted(doc, view.querySelector('[elementtiming]'), () => {
            if (button.isConnected) {
              const take = mayTakeFocus(doc);
              view.setAttribute('data-agio-focus', take ? 'taken' : 'left'); // decided: whoever waits on it knows
              if (take) {
                button.focus({ preventScroll: true });
              }
            }
          });
        }
      }
    }
  }).observe(doc.body, { childList: true, subtree: true });
}
