/**
 * The notebook side of the extension: runs the `%agio` commands that transcript controls ask for
 * (magic.ts), and gives `%%agio` cells Markdown highlighting instead of Python.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { agioCellMime } from './highlight';
import { MAGIC_EVENT, MagicRequest } from './magic';

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
  notebook.model.sharedModel.insertCell(index + 1, { cell_type: 'code', source: code, metadata: {} });
  notebook.activeCellIndex = index + 1;
  notebook.deselectAll();
  void NotebookActions.run(notebook, panel.sessionContext);
}

function highlightCell(cell: Cell, fallback: () => string): void {
  if (cell.model.type !== 'code') {
    return;
  }
  const mime = agioCellMime(cell.model.sharedModel.getSource());
  const wanted = mime ?? (cell.node.dataset.agioHighlight ? fallback() : null);
  if (mime) {
    cell.node.dataset.agioHighlight = mime;
  } else {
    delete cell.node.dataset.agioHighlight;
  }
  if (wanted && cell.model.mimeType !== wanted) {
    cell.model.mimeType = wanted;
  }
}

/** Keep every `%%agio` cell of a notebook in Markdown mode: as typed, and when the kernel resets modes. */
function watchHighlighting(panel: NotebookPanel): void {
  const notebook = panel.content;
  const seen = new WeakSet<Cell>();
  const scan = () => {
    for (const cell of notebook.widgets) {
      if (!seen.has(cell)) {
        seen.add(cell);
        const update = () => highlightCell(cell, () => notebook.codeMimetype);
        cell.model.contentChanged.connect(update);
        cell.model.mimeTypeChanged.connect(update);
      }
      highlightCell(cell, () => notebook.codeMimetype);
    }
  };
  notebook.model?.cells.changed.connect(() => requestAnimationFrame(scan));
  notebook.modelChanged.connect(() => {
    notebook.model?.cells.changed.connect(() => requestAnimationFrame(scan));
    requestAnimationFrame(scan);
  });
  void panel.context.ready.then(scan);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'agio-notebook:notebook',
  description: 'Runs the commands of agio transcript controls; highlights %%agio cells as Markdown.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.widgetAdded.connect((_, panel) => {
      panel.node.addEventListener(MAGIC_EVENT, event => handleMagic(panel, event));
      watchHighlighting(panel);
    });
  }
};

export default plugin;
