import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { exploreExtensions, extensionFor } from './explore_widgets';
import { MIME_TYPE, renderTranscript } from './render';
import { withSnapshotNote } from './snapshot';
import {
  BATCH_MIME_TYPE, PLAN_MIME_TYPE, SWEEP_MIME_TYPE, TRACE_MIME_TYPE, renderBatch, renderPlan, renderSweep, renderTrace
} from './views';

/** Output widget for a saved agio run: rebuilt from the transcript's events, no kernel needed. */
export class RunTranscriptWidget extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-AgioRun');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    const doc = this.node.ownerDocument;
    this.node.replaceChildren(...withSnapshotNote(renderTranscript(data, doc), data, doc));
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

/** Every other agio view a notebook saves: each drawn from its data, so untrusted notebooks show it whole. */
const viewExtensions: IRenderMime.IExtension[] = [
  extensionFor('agio-notebook:batch', BATCH_MIME_TYPE, renderBatch),
  extensionFor('agio-notebook:plan', PLAN_MIME_TYPE, renderPlan),
  extensionFor('agio-notebook:trace', TRACE_MIME_TYPE, renderTrace),
  extensionFor('agio-notebook:sweep', SWEEP_MIME_TYPE, renderSweep)
];

export default [extension, ...exploreExtensions, ...viewExtensions];
