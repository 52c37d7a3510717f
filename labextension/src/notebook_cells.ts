/** Running a control's command in a notebook: one home for the notebook plugin and the Runs panel's tabs. */
import type { ICellMetadata } from '@jupyterlab/nbformat';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { LOAD_AGIO, needsAgio } from './magic';

/** Insert a code cell holding `source` at `at` and run it; agio is loaded silently first where it needs it. */
export function insertAndRun(panel: NotebookPanel, at: number, source: string, metadata: Partial<ICellMetadata> = {}): void {
  const notebook = panel.content;
  if (!notebook.model) {
    return;
  }
  notebook.model.sharedModel.insertCell(at, { cell_type: 'code', source, metadata });
  notebook.activeCellIndex = at;
  notebook.deselectAll();
  const kernel = panel.sessionContext.session?.kernel;
  if (kernel && needsAgio(source)) {
    // queued before the cell on the same channel, so the cell finds agio loaded; silent: no output anywhere
    kernel.requestExecute({ code: LOAD_AGIO, silent: true, store_history: false });
  }
  void NotebookActions.run(notebook, panel.sessionContext);
}
