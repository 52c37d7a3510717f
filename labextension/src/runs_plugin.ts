/**
 * The Runs panel in JupyterLab's left sidebar, and the tabs it opens in the main area. Transcript
 * controls (Retry, Fork, Use attempt, feedback) in those tabs insert their `%agio` command into the
 * notebook last active and run it there; with no notebook open, the tab says which notebook to open.
 * A tree's "Open transcript" opens the run's tab (no kernel needed).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { el } from './dom';
import { MAGIC_EVENT, MagicRequest } from './magic';
import { insertAndRun } from './notebook_cells';
import { RunsApi, Update } from './runs_api';
import { RunsPanel } from './runs_panel';
import { DashboardTab, StoreTab, TranscriptTab, diffTab, treeTab } from './runs_views';

const runsIcon = new LabIcon({
  name: 'agio-notebook:runs',
  svgstr: '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><path class="jp-icon3" ' +
    'fill="#616161" d="M3 5h2v2H3zm4 0h14v2H7zM3 11h2v2H3zm4 0h14v2H7zm-4 6h2v2H3zm4 0h14v2H7z"/></svg>'
});

/** Insert `code` below the active cell of `panel` and run it; the notebook comes to the front. */
function runBelowActive(app: JupyterFrontEnd, panel: NotebookPanel, code: string): void {
  const notebook = panel.content;
  app.shell.activateById(panel.id);
  insertAndRun(panel, notebook.widgets.length ? notebook.activeCellIndex + 1 : 0, code);
}

const REPLAY = /^%agio replay ([A-Za-z0-9_][A-Za-z0-9_.:-]*)$/;

export const runsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'agio-notebook:runs',
  description: "The Runs panel: the store's runs, live, with transcripts, diffs, trees and a class dashboard.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const api = new RunsApi(app.serviceManager.serverSettings);
    const tabs = new Map<string, StoreTab<unknown>>();

    const show = (tab: StoreTab<unknown>): void => {
      const open = tabs.get(tab.id);
      if (open && !open.isDisposed) {
        app.shell.activateById(open.id);
        if (open.wantsUpdates()) {
          void open.reload();
        }
        tab.dispose();
        return;
      }
      tabs.set(tab.id, tab);
      tab.disposed.connect(() => tabs.delete(tab.id));
      tab.node.addEventListener(MAGIC_EVENT, event => onMagic(tab, event));
      app.shell.add(tab, 'main');
      app.shell.activateById(tab.id);
      void tab.reload();
    };

    const openRun = (runId: string) => show(new TranscriptTab(api, runId) as StoreTab<unknown>);

    const onMagic = (tab: StoreTab<unknown>, event: Event): void => {
      const code = (event as CustomEvent<MagicRequest>).detail?.code;
      if (typeof code !== 'string') {
        return;
      }
      const replay = REPLAY.exec(code);
      if (replay) {
        event.preventDefault();
        openRun(replay[1]);
        return;
      }
      const panel = tracker.currentWidget;
      if (panel) {
        event.preventDefault(); // handled: the control shows no "run in a cell" hint
        runBelowActive(app, panel, code);
        return;
      }
      // no notebook to run it in: the control shows the command; say where it belongs
      const run = tab instanceof TranscriptTab ? tab.run : null;
      const path = run?.notebook_path;
      if (path) {
        const button = el(tab.node.ownerDocument, 'button', ['agio-runs-open-notebook'], `Open ${path}`);
        button.addEventListener('click', () => void app.commands.execute('docmanager:open', { path }));
        tab.say(`Open ${path} (where this run was made), or any notebook on this store, to run: ${code}`, button);
      } else {
        tab.say(`Open a notebook on this store to run: ${code}`);
      }
    };

    const panel = new RunsPanel(api, {
      openRun,
      openDiff: (a, b) => show(diffTab(api, a, b) as StoreTab<unknown>),
      openTree: sessionId => show(treeTab(api, sessionId) as StoreTab<unknown>),
      openDashboard: () => show(new DashboardTab(api, openRun) as StoreTab<unknown>),
      changed: (update: Update) => {
        const something = update.runs === null || Boolean(update.runs?.length || update.journals?.length);
        for (const tab of tabs.values()) {
          if (something && tab.wantsUpdates()) {
            void tab.reload(); // one read at a time: changes meanwhile are read once more after it
          }
        }
      }
    });
    panel.title.icon = runsIcon;
    panel.title.caption = 'agio runs';
    app.shell.add(panel, 'left', { rank: 650 });
  }
};
