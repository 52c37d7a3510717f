/**
 * The extension's answer to the kernel's hello: when agio loads in a kernel it opens an
 * "agio.frontend" comm, and this extension says which of its widgets it has. The kernel uses a
 * widget of this extension only after that answer (elsewhere, e.g. VS Code, it keeps to ipywidgets).
 */

import type { NotebookPanel } from '@jupyterlab/notebook';

import { MODULE_VERSION } from './pause_widget';

export const FRONTEND_TARGET = 'agio.frontend';

/** What the kernel hears back. */
export const HELLO_REPLY = { extension: MODULE_VERSION, widgets: ['AgioPauseModel'] };

/** Answer the hello of every kernel this session connects to (a restart or a change of kernel too). */
export function answerHellos(session: NotebookPanel['sessionContext']): void {
  const listen = () => {
    session.session?.kernel?.registerCommTarget(FRONTEND_TARGET, comm => {
      comm.send(HELLO_REPLY);
    });
  };
  session.kernelChanged.connect(listen);
  listen();
}
