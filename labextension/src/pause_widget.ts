/**
 * The pause view as a widget of its own (module "agio-notebook"), registered with JupyterLab's widget
 * manager. The kernel uses it once this extension has answered its hello (see frontend.ts); without
 * the extension it falls back to standard ipywidgets.
 */

import { DOMWidgetModel, DOMWidgetView, IJupyterWidgetRegistry } from '@jupyter-widgets/base';

import { PauseState, renderPause } from './pause_dom';

declare function require(path: string): { name: string; version: string };

// the package's own name and version, which the kernel's widgets name (^major.minor)
const PACKAGE = require('../package.json');
export const MODULE_NAME = PACKAGE.name;
export const MODULE_VERSION = PACKAGE.version;

export class AgioPauseModel extends DOMWidgetModel {
  defaults(): any {
    return {
      ...super.defaults(),
      _model_name: 'AgioPauseModel',
      _model_module: MODULE_NAME,
      _model_module_version: MODULE_VERSION,
      _view_name: 'AgioPauseView',
      _view_module: MODULE_NAME,
      _view_module_version: MODULE_VERSION,
      kind: '',
      html: '',
      editors: [],
      buttons: []
    };
  }
}

export class AgioPauseView extends DOMWidgetView {
  render(): void {
    const state: PauseState = {
      kind: this.model.get('kind'),
      html: this.model.get('html'),
      editors: this.model.get('editors'),
      buttons: this.model.get('buttons')
    };
    // a custom message: sent at once, even while the widget manager holds state updates back
    this.el.replaceChildren(renderPause(this.el.ownerDocument, state, click => this.send(click)));
  }
}

export function registerPauseWidget(registry: IJupyterWidgetRegistry | null): void {
  registry?.registerWidget({
    name: MODULE_NAME,
    version: MODULE_VERSION,
    exports: { AgioPauseModel, AgioPauseView } as any
  });
}
