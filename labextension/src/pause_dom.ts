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
  /** [name, style, icon, label]: the name a click sends, an ipywidgets button style ("success", "info",
   * "warning", "danger" or ""), a Font Awesome icon name, and what the button says (the name if absent). */
  buttons: ([string, string, string] | [string, string, string, string])[];
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
  for (const [name, style, icon, label] of list<[string, string, string, string?]>(state.buttons)) {
    const button = el(doc, 'button', ['jupyter-button', 'widget-button', `agio-pause-${token(name)}`]) as HTMLButtonElement;
    button.type = 'button';
    if (style) {
      button.classList.add(`mod-${token(style)}`);
    }
    if (icon) {
      button.append(el(doc, 'i', ['fa', `fa-${token(icon)}`]));
    }
    button.append(doc.createTextNode(String(label ?? name)));
    button.addEventListener('click', () => {
      send({ event: 'click', name: String(name), texts: Object.fromEntries(Array.from(areas, ([k, a]) => [k, a.value])) });
    });
    buttons.append(button);
  }
  view.append(buttons);
  return view;
}

/**
 * Lay out a hidden sample of a run's views once, in `host`, when a notebook that uses agio opens. The
 * page's first pause view otherwise pays for what the page has not drawn yet (the buttons' icon font,
 * its first text area, the run header's styles): some 15 ms before it can be painted.
 */
export function prepaintViews(doc: Document, host: HTMLElement): void {
  const sample = el(doc, 'div', ['jp-OutputArea-output', 'agio-prepaint']);
  sample.setAttribute('aria-hidden', 'true');
  sample.style.cssText = 'position:absolute;left:-10000px;top:0;width:800px;visibility:hidden;pointer-events:none';
  sample.innerHTML = '<div class="agio-run"><div class="agio-header"><b>agio Run</b> '
    + '<span class="agio-status" style="font-size:11px">running</span></div>'
    + '<button class="jupyter-button widget-button mod-warning"><i class="fa fa-stop"></i>Stop</button></div>';
  sample.append(renderPause(doc, { // a kind and a button no key, test or focus looks for
    kind: 'sample',
    html: '<div class="agio-pause-title"><b><i class="fa fa-pause"></i> Paused</b> <code>m</code></div>',
    editors: [{ key: 'messages', label: 'messages JSON', value: '[]', rows: 2 }],
    buttons: [['Sample', 'success', 'play']]
  }, () => undefined));
  host.append(sample);
  void sample.offsetHeight; // laid out now; removed once its fonts have loaded
  const fonts = doc.fonts?.ready ?? Promise.resolve();
  void fonts.then(() => sample.remove(), () => sample.remove());
}
