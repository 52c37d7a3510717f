/**
 * A step-mode pause view, drawn as one element from the state of one widget model: the request
 * (markup the kernel built, every model-given text escaped there), one editor per editable part, and
 * the buttons. A click sends the button's name with every editor's text in one message, so a pause
 * costs the browser one model to build, and an edit needs no state update of its own (while a cell
 * runs, the widget manager holds back all but the first state update of a model; messages are not held).
 */

import { classToken, el } from './dom';

export interface PauseEditor {
  key: string;
  label: string;
  value: string;
  rows: number;
}

export interface PauseState {
  kind: string;
  html: string;
  editors: PauseEditor[];
  /** [name, style, icon]: an ipywidgets button style ("success", "info", "warning", "danger" or "") and a
   * Font Awesome icon name. */
  buttons: [string, string, string][];
}

export interface PauseClick {
  event: 'click';
  name: string;
  texts: Record<string, string>;
}

function list<T>(value: unknown): T[] {
  return Array.isArray(value) ? value.filter(v => v && typeof v === 'object') : [];
}

/** A class-name suffix from state: letters and dashes only. */
function token(value: unknown): string {
  return String(value ?? '').toLowerCase().replace(/[^a-z-]/g, '');
}

/** The view's element; `send` is called with each click (a button, or its key via debugger.ts). */
export function renderPause(doc: Document, state: PauseState, send: (click: PauseClick) => void): HTMLElement {
  const view = el(doc, 'div', ['agio-pause', `agio-pause-${classToken(state.kind)}`, 'agio-pause-frame']);
  const shown = el(doc, 'div', ['agio-pause-shown']);
  shown.innerHTML = String(state.html ?? ''); // the kernel's markup: model-given text is escaped there
  view.append(shown);
  const areas = new Map<string, HTMLTextAreaElement>();
  for (const editor of list<PauseEditor>(state.editors)) {
    const row = el(doc, 'div', ['widget-textarea', 'widget-inline-hbox', 'agio-pause-editor',
      `agio-pause-edit-${token(editor.key)}`]);
    const label = el(doc, 'label', ['widget-label'], String(editor.label ?? ''));
    label.title = String(editor.label ?? '');
    const area = doc.createElement('textarea');
    area.rows = Number(editor.rows) || 4;
    area.value = String(editor.value ?? '');
    area.spellcheck = false;
    row.append(label, area);
    areas.set(String(editor.key), area);
    view.append(row);
  }
  const buttons = el(doc, 'div', ['agio-pause-buttons']);
  for (const [name, style, icon] of list<[string, string, string]>(state.buttons)) {
    const button = el(doc, 'button', ['jupyter-button', 'widget-button', `agio-pause-${token(name)}`]) as HTMLButtonElement;
    button.type = 'button';
    if (style) {
      button.classList.add(`mod-${token(style)}`);
    }
    if (icon) {
      button.append(el(doc, 'i', ['fa', `fa-${token(icon)}`]));
    }
    button.append(doc.createTextNode(String(name)));
    button.addEventListener('click', () => {
      send({ event: 'click', name: String(name), texts: Object.fromEntries(Array.from(areas, ([k, a]) => [k, a.value])) });
    });
    buttons.append(button);
  }
  view.append(buttons);
  return view;
}
