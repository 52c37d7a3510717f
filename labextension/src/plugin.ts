/**
 * The notebook side of the extension: runs the `%agio` commands that transcript controls ask for
 * (magic.ts), and gives `%%agio` cells Markdown highlighting instead of Python.
 */

import { IJupyterWidgetRegistry } from '@jupyter-widgets/base';
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ILatexTypesetter } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { watchPauses } from './debugger';
import { answerHellos } from './frontend';
import { agioCellMime } from './highlight';
import { MAGIC_EVENT, MagicRequest, insertionIndex } from './magic';
import { insertAndRun } from './notebook_cells';
import { prepaintViews } from './pause_dom';
import { registerPauseWidget } from './pause_widget';
import { runsPlugin } from './runs_plugin';

function insertedFor(cell: Cell): string | undefined {
  const agio = cell.model.getMetadata('agio') as Record<string, unknown> | undefined;
  return typeof agio?.inserted_for === 'string' ? agio.inserted_for : undefined;
}

/** Insert a code cell with the requested command below the output's cell, and run it. */
export function handleMagic(panel: NotebookPanel, event: Event): void {
  const code = (event as CustomEvent<MagicRequest>).detail?.code;
  const notebook = panel.content;
  const index = notebook.widgets.findIndex(cell => cell.node.contains(event.target as Node));
  if (typeof code !== 'string' || index < 0 || !notebook.model) {
    return;
  }
  event.preventDefault(); // handled: exactly once, by the notebook that holds the output
  event.stopPropagation();
  const runId = (event.target as Element).closest?.('[data-agio-run]')?.getAttribute('data-agio-run') || null;
  const source = code;
  const at = insertionIndex(notebook.widgets.map(insertedFor), index, runId);
  const previous = notebook.widgets[at - 1];
  if (at > index + 1 && previous.model.type === 'code' && previous.model.sharedModel.getSource() === source
      && (previous.model as ICodeCellModel).executionCount === null) {
    // the same command is still waiting for a busy kernel: a second click adds no second cell
    notebook.activeCellIndex = at - 1;
    return;
  }
  insertAndRun(panel, at, source, runId ? { agio: { inserted_for: runId } } : {});
}

/**
 * Keep every `%%agio` cell of a notebook in Markdown mode: as typed, and when the kernel's language
 * resets every code cell's mode.
 *
 * The editor loads a mode asynchronously and applies modes in the order they finish loading. So
 * after someone else sets a mode, wait until that mode has loaded (the editor then has applied it)
 * before setting ours, or a slow Python load would land last and win.
 */
function watchHighlighting(panel: NotebookPanel, languages: IEditorLanguageRegistry): void {
  const notebook = panel.content;
  const seen = new WeakSet<Cell>();
  const apply = async (cell: Cell): Promise<void> => {
    if (cell.isDisposed || cell.model.type !== 'code') {
      return;
    }
    const mime = agioCellMime(cell.model.sharedModel.getSource());
    const current = cell.model.mimeType;
    if (mime) {
      cell.node.dataset.agioHighlight = mime;
      if (current !== mime) {
        await languages.getLanguage(current).catch(() => null);
        if (!cell.isDisposed && agioCellMime(cell.model.sharedModel.getSource()) === mime) {
          cell.model.mimeType = mime;
        }
      }
    } else if (cell.node.dataset.agioHighlight) {
      delete cell.node.dataset.agioHighlight;
      cell.model.mimeType = notebook.codeMimetype; // no longer an agio cell: the kernel's language again
    }
  };
  const scan = () => {
    for (const cell of notebook.widgets) {
      if (!seen.has(cell)) {
        seen.add(cell);
        cell.model.contentChanged.connect(() => void apply(cell));
        cell.model.mimeTypeChanged.connect(() => void apply(cell));
      }
      void apply(cell);
    }
  };
  const follow = () => {
    notebook.model?.cells.changed.connect(() => requestAnimationFrame(scan));
    requestAnimationFrame(scan);
  };
  notebook.modelChanged.connect(follow);
  follow();
  void panel.context.ready.then(scan);
}

let firstRunWarmed = false;

/**
 * Load the LaTeX typesetter once a notebook that uses agio opens, and lay out a sample of the run's
 * views. Every HTML widget asks the typesetter to typeset, and it loads on the first ask: some twenty
 * scripts and a font, fetched and parsed in the middle of the first run, which then shows its first
 * pause view and hears its first click late.
 */
function warmFirstRun(panel: NotebookPanel, typesetter: IRenderMime.ILatexTypesetter | null): void {
  void panel.context.ready.then(() => {
    const usesAgio = panel.content.widgets.some(cell => /%%agio|agio_notebook/.test(cell.model.sharedModel.getSource()));
    if (usesAgio && !firstRunWarmed) {
      firstRunWarmed = true;
      prepaintViews(document, panel.content.node);
      if (typesetter) {
        void Promise.resolve(typesetter.typeset(document.createElement('div'))).catch(() => undefined);
      }
      // the widget library, shared with (and loaded by) the widget manager on the page's first widget
      void import('@jupyter-widgets/controls').catch(() => undefined);
    }
  });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'agio-notebook:notebook',
  description: 'Runs the commands of agio transcript controls; highlights %%agio cells as Markdown; shows step-mode pauses.',
  autoStart: true,
  requires: [INotebookTracker, IEditorLanguageRegistry],
  optional: [ILatexTypesetter, IJupyterWidgetRegistry],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker, languages: IEditorLanguageRegistry,
    typesetter: IRenderMime.ILatexTypesetter | null, widgetRegistry: IJupyterWidgetRegistry | null) => {
    watchPauses(document); // keys of step mode's pause views
    registerPauseWidget(widgetRegistry);
    tracker.widgetAdded.connect((_, panel) => {
      if (widgetRegistry) {
        answerHellos(panel.sessionContext); // only where the pause widget can be shown
      }
      panel.node.addEventListener(MAGIC_EVENT, event => handleMagic(panel, event));
      watchHighlighting(panel, languages);
      warmFirstRun(panel, typesetter);
    });
  }
};

export default [plugin, runsPlugin];
