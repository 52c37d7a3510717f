import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { exploreExtensions } from './explore_widgets';
import { MIME_TYPE, renderTranscript } from './render';

/** Output widget for a saved agio run: rebuilt from the transcript's events, no kernel needed. */
export class RunTranscriptWidget extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-AgioRun');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.replaceChildren(renderTranscript(model.data[this._mimeType], this.node.ownerDocument));
    return Promise.resolve();
  }

  private _mimeType: string;
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  // safe: it only writes text nodes, so it may render outputs of untrusted (e.g. just opened) notebooks
  safe: true,
  mimeTypes: [MIME_TYPE],
  createRenderer: options => new RunTranscriptWidget(options)
};

const extension: IRenderMime.IExtension = {
  id: 'agio-notebook:transcript',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

export default [extension, ...exploreExtensions];
