/** JupyterLab renderers for saved diffs and run trees; the drawing itself is in explore.ts. */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { DIFF_MIME_TYPE, TREE_MIME_TYPE, renderDiff, renderTree } from './explore';
import { withSnapshotNote } from './snapshot';

class ExploreWidget extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions, private _render: (data: unknown, doc: Document) => HTMLElement) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-AgioRun');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    const doc = this.node.ownerDocument;
    this.node.replaceChildren(...withSnapshotNote(this._render(data, doc), data, doc));
    return Promise.resolve();
  }

  private _mimeType: string;
}

export function extensionFor(id: string, mimeType: string, render: (data: unknown, doc: Document) => HTMLElement): IRenderMime.IExtension {
  return {
    id,
    rendererFactory: {
      safe: true, // text nodes only: fine for untrusted (just opened) notebooks
      mimeTypes: [mimeType],
      createRenderer: options => new ExploreWidget(options, render)
    },
    rank: 0,
    dataType: 'json'
  };
}

export const exploreExtensions: IRenderMime.IExtension[] = [
  extensionFor('agio-notebook:diff', DIFF_MIME_TYPE, renderDiff),
  extensionFor('agio-notebook:tree', TREE_MIME_TYPE, renderTree)
];
