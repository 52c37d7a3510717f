// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { mayTakeFocus, pauseKey, watchPauses } from '../src/debugger';
import { PauseClick, prepaintViews, renderPause } from '../src/pause_dom';

const STATE = {
  kind: 'tool',
  html: '<div class="agio-pause-title" data-agio-paused-at="1">Paused &lt;img&gt;</div>',
  editors: [{ key: 'arguments', label: 'arguments JSON', value: '{"a": 2}', rows: 2 },
            { key: 'skip', label: 'skip result', value: '', rows: 2 }],
  buttons: [['Continue', 'success', 'play'], ['Step', 'info', 'step-forward'], ['Edit', '', 'pencil'],
            ['Skip', 'warning', 'share'], ['Abort', 'danger', 'stop']] as [string, string, string][]
};

describe('the one-model pause view', () => {
  it('draws the kernel markup, one editor per part and the buttons, with the classes keys and tests use', () => {
    const view = renderPause(document, STATE, () => undefined);
    expect(view.classList.contains('agio-pause') && view.classList.contains('agio-pause-tool')).toBe(true);
    expect(view.querySelector('.agio-pause-title')?.textContent).toBe('Paused <img>');
    expect(view.querySelectorAll('img').length).toBe(0);
    expect(view.querySelector('.agio-pause-edit-arguments textarea')?.getAttribute('rows')).toBe('2');
    expect([...view.querySelectorAll('button')].map(b => b.textContent)).toEqual(['Continue', 'Step', 'Edit', 'Skip', 'Abort']);
    expect(view.querySelector('.agio-pause-continue')?.classList.contains('mod-success')).toBe(true);
    expect(view.querySelector('.agio-pause-step i')?.className).toBe('fa fa-step-forward');
  });

  it('sends a click with every editor text as it is at that moment, by mouse or by key', () => {
    const sent: PauseClick[] = [];
    const view = renderPause(document, STATE, click => sent.push(click));
    document.body.replaceChildren(view);
    (view.querySelector('.agio-pause-edit-arguments textarea') as HTMLTextAreaElement).value = '{"a": 20}';
    (view.querySelector('.agio-pause-edit') as HTMLButtonElement).click();
    (view.querySelector('.agio-pause-edit-arguments textarea') as HTMLTextAreaElement).value = '{"a": 30}';
    const step = view.querySelector('.agio-pause-step') as HTMLButtonElement;
    expect(pauseKey(new KeyboardEvent('keydown', { key: 'k' }))).toBe(false); // not from inside the view
    expect(sent).toEqual([
      { event: 'click', name: 'Edit', texts: { arguments: '{"a": 20}', skip: '' } }
    ]);
    const key = new KeyboardEvent('keydown', { key: 'c', bubbles: true });
    Object.defineProperty(key, 'target', { value: step });
    expect(pauseKey(key)).toBe(true);
    expect(sent[1]).toEqual({ event: 'click', name: 'Continue', texts: { arguments: '{"a": 30}', skip: '' } });
  });

  it('survives state of the wrong shape', () => {
    const view = renderPause(document, { kind: '"><x' } as any, () => undefined);
    expect(view.className).toBe('agio-pause agio-pause-x agio-pause-frame');
    expect(view.querySelectorAll('button, textarea').length).toBe(0);
    const odd = renderPause(document, {
      kind: 'tool', html: '', editors: [null, 'x', { key: '__proto__', label: 'l', value: 'v', rows: 'many' }],
      buttons: [null, ['Go on now', 'success extra', 'play"><b'], 'Abort']
    } as any, () => undefined);
    expect([...odd.querySelectorAll('button')].map(b => b.className))
      .toEqual(['jupyter-button widget-button agio-pause-goonnow mod-successextra']);
    expect(odd.querySelector('button i')?.className).toBe('fa fa-playb');
    expect(odd.querySelector('textarea')?.rows).toBe(4);
  });
});

describe('the views laid out once when a notebook opens', () => {
  it('are hidden from sight, keys and readers, and gone once the fonts have loaded', async () => {
    const host = document.createElement('div');
    document.body.append(host);
    prepaintViews(document, host);
    const sample = host.querySelector('.agio-prepaint') as HTMLElement;
    expect(sample.getAttribute('aria-hidden')).toBe('true');
    expect(sample.style.visibility).toBe('hidden');
    expect(sample.querySelector('.agio-pause-frame .fa-play')).not.toBeNull();
    expect(sample.querySelector('.agio-pause-continue, .agio-pause-model')).toBeNull();
    await Promise.resolve();
    await Promise.resolve();
    expect(host.querySelector('.agio-prepaint')).toBeNull();
  });
});

describe('a pause view asks for the focus', () => {
  it('from the page or a cell in command mode, never from someone typing', () => {
    document.body.replaceChildren();
    (document.activeElement as HTMLElement | null)?.blur();
    expect(mayTakeFocus(document)).toBe(true);
    const cell = document.createElement('div');
    cell.tabIndex = 0;
    const editor = document.createElement('div');
    editor.className = 'cm-editor';
    const content = document.createElement('div');
    content.tabIndex = 0;
    editor.append(content);
    const field = document.createElement('textarea');
    document.body.append(cell, editor, field);
    cell.focus();
    expect(mayTakeFocus(document)).toBe(true);
    content.focus();
    expect(mayTakeFocus(document)).toBe(false);
    field.focus();
    expect(mayTakeFocus(document)).toBe(false);
  });

  it('once the view is painted (here, without Element Timing, after its time limit), and says what it decided', async () => {
    document.body.replaceChildren();
    (document.activeElement as HTMLElement | null)?.blur();
    watchPauses(document);
    const view = renderPause(document, { ...STATE, html: '<div class="agio-pause-title" elementtiming="agio-pause">Paused</div>' },
      () => undefined);
    document.body.append(view);
    const pause = document.querySelector('.agio-pause') as HTMLElement;
    expect(pause.dataset.agioFocus).toBeUndefined(); // not as it is inserted: the first paint goes first
    await new Promise(resolve => setTimeout(resolve, 400));
    expect(pause.dataset.agioFocus).toBe('taken');
    expect(document.activeElement).toBe(pause.querySelector('.agio-pause-continue'));
  });
});
