/**
 * The Runs panel: a sidebar listing the store's runs, newest first, filtered by the store, kept current
 * by the server's updates socket (a change is shown within moments, whoever wrote it). Clicking a run,
 * picking two, or a row's tree button asks the plugin (runs_plugin.ts) to open a tab.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { el } from './dom';
import { ApiError, Facets, FILTERS, Filters, RunRow, RunsApi, StoreInfo, Update } from './runs_api';
import { STATUSES, filterSelect, runRow, setChoices } from './runs_list';

const PAGE = 50;
const MAX_SHOWN = 500; // the most a refresh asks for at once (the server's page limit)
const FACETS_EVERY = 1000; // ms: the filters' choices are read again at most this often

export interface PanelActions {
  openRun(runId: string): void;
  openDiff(a: string, b: string): void;
  openTree(sessionId: string): void;
  openDashboard(): void;
  /** The panel heard that the store changed: open tabs may want to read again. */
  changed(update: Update): void;
}

export class RunsPanel extends Widget {
  readonly api: RunsApi;
  private filters: Filters = {};
  private rows: RunRow[] = [];
  private cursor: string | null = null;
  private picked: string[] = [];
  private info: StoreInfo | null = null;
  private facets: Facets = {};
  private facetsAt = 0;
  private facetsLater: ReturnType<typeof setTimeout> | undefined;
  private loading: Promise<void> | null = null;
  private again = false;
  private storeNote = '';
  private liveNote = '';
  private damage: string[] = [];
  private follower: { dispose(): void } | null = null;
  private readonly filterBox: HTMLElement;
  private readonly selects = new Map<string, HTMLSelectElement>();
  private readonly list: HTMLElement;
  private readonly note: HTMLElement;
  private readonly footer: HTMLElement;
  private readonly headLine: HTMLElement;
  private readonly dashboardButton: HTMLButtonElement;
  private readonly diffButton: HTMLButtonElement;

  constructor(api: RunsApi, private actions: PanelActions) {
    super();
    this.api = api;
    this.id = 'agio-runs-panel';
    this.addClass('agio-runs-panel');
    this.title.caption = 'agio runs';
    const doc = this.node.ownerDocument;
    const top = el(doc, 'div', ['agio-runs-top']);
    this.headLine = el(doc, 'div', ['agio-runs-where'], 'Runs');
    this.dashboardButton = el(doc, 'button', ['agio-runs-dashboard'], 'Class dashboard') as HTMLButtonElement;
    this.dashboardButton.type = 'button';
    this.dashboardButton.hidden = true;
    this.dashboardButton.addEventListener('click', () => this.actions.openDashboard());
    top.append(this.headLine, this.dashboardButton);
    this.filterBox = el(doc, 'div', ['agio-runs-filters']);
    this.note = el(doc, 'div', ['agio-runs-note']);
    this.list = el(doc, 'div', ['agio-runs-list']);
    this.list.setAttribute('role', 'list');
    this.footer = el(doc, 'div', ['agio-runs-footer']);
    this.diffButton = el(doc, 'button', ['agio-runs-diff'], 'Compare the two picked') as HTMLButtonElement;
    this.diffButton.type = 'button';
    this.diffButton.disabled = true;
    this.diffButton.addEventListener('click', () => {
      if (this.picked.length === 2) {
        this.actions.openDiff(this.picked[0], this.picked[1]);
      }
    });
    this.node.append(top, this.filterBox, this.note, this.diffButton, this.list, this.footer);
    this.list.addEventListener('click', event => this.onListClick(event));
    this.list.addEventListener('keydown', event => {
      const row = (event.target as HTMLElement).closest?.('.agio-runs-row') as HTMLElement | null;
      if (row && event.key === 'Enter') {
        this.actions.openRun(row.dataset.runId ?? '');
      }
    });
    this.makeFilters();
    this.renderFilters();
  }

  /** Start reading the store and following its changes (the plugin calls it when the panel is first shown). */
  start(): void {
    if (this.follower) {
      return;
    }
    this.follower = this.api.follow(u => this.onUpdate(u), () => {
      this.liveNote = '';
      void this.refresh(true);
    }, () => {
      this.liveNote = 'the Jupyter server went away: reconnecting…';
      this.showNote();
    });
  }

  /** The store is read, and followed, from the first time the panel is shown (a closed sidebar costs nothing). */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.start();
  }

  dispose(): void {
    this.follower?.dispose();
    super.dispose();
  }

  private onUpdate(update: Update): void {
    if (update.type === 'store') {
      this.liveNote = update.state === 'down' ? update.message ?? 'the store cannot be reached' : '';
      if (update.state === 'none') {
        this.storeNote = update.message ?? '';
      }
      this.showNote();
      return;
    }
    if (update.runs === null || (update.runs && update.runs.length) || this.info === null) {
      void this.refresh(false);
    }
    this.actions.changed(update);
  }

  /** Read the first rows again (as many as are shown), one read at a time; a change meanwhile reads once more. */
  refresh(withInfo = false): Promise<void> {
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    this.loading = this.load(withInfo).finally(() => {
      this.loading = null;
      if (this.again) {
        this.again = false;
        void this.refresh(false);
      }
    });
    return this.loading;
  }

  private async load(withInfo: boolean): Promise<void> {
    try {
      if (withInfo || this.info === null) {
        const info = await this.api.store();
        this.headLine.textContent = `Runs · ${info.where}` + (info.user ? ` · ${info.user}` : '');
        this.dashboardButton.hidden = info.role !== 'teacher';
        if (info.state === 'none') { // no store yet: its line, and nothing more to read
          this.info = null;
          this.rows = [];
          this.cursor = null;
          this.storeNote = info.message ?? '';
          this.renderRows();
          return;
        }
        this.info = info;
      }
      await this.readFacets();
      const limit = Math.min(MAX_SHOWN, Math.max(PAGE, this.rows.length));
      const page = await this.api.runs(this.filters, limit);
      this.rows = page.runs;
      this.cursor = page.next_cursor;
      this.damage = page.damage ?? [];
      this.storeNote = '';
    } catch (e) {
      this.storeNote = (e as Error).message;
      if (e instanceof ApiError && e.status === 404) { // the store went away
        this.info = null;
        this.rows = [];
        this.cursor = null;
      }
    }
    this.renderRows();
  }

  /** The filters' choices, read at most every FACETS_EVERY ms; a change meanwhile is read when that time is up. */
  private async readFacets(): Promise<void> {
    const wait = this.facetsAt + FACETS_EVERY - Date.now();
    if (wait > 0) {
      this.facetsLater ??= setTimeout(() => {
        this.facetsLater = undefined;
        void this.readFacets().catch(() => undefined);
      }, wait);
      return;
    }
    this.facetsAt = Date.now();
    this.facets = await this.api.facets();
    this.renderFilters();
  }

  private async more(): Promise<void> {
    if (!this.cursor) {
      return;
    }
    try {
      const page = await this.api.runs(this.filters, PAGE, this.cursor);
      const known = new Set(this.rows.map(r => r.id));
      this.rows = [...this.rows, ...page.runs.filter(r => !known.has(r.id))];
      this.cursor = page.next_cursor;
    } catch (e) {
      this.storeNote = (e as Error).message;
    }
    this.renderRows();
  }

  private setFilter(name: string, value: string): void {
    const next = { ...this.filters, [name]: value || undefined };
    if (!value) {
      delete (next as Record<string, unknown>)[name];
    }
    this.filters = next;
    this.rows = [];
    void this.refresh(false);
  }

  /** The filter boxes, made once: typing or choosing is never interrupted by a refresh. */
  private makeFilters(): void {
    const doc = this.node.ownerDocument;
    for (const name of ['agent', 'status', 'notebook', 'user']) {
      const select = filterSelect(doc, name, name);
      select.addEventListener('change', () => this.setFilter(name, select.value));
      this.selects.set(name, select);
    }
    const text = doc.createElement('input');
    text.type = 'search';
    text.className = 'agio-runs-text';
    text.placeholder = 'text in the query or answer';
    text.setAttribute('aria-label', 'text in the query or answer');
    let typing: ReturnType<typeof setTimeout> | undefined;
    text.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => this.setFilter('text', text.value), 250);
    });
    this.filterBox.replaceChildren(...this.selects.values(), text);
  }

  /** New choices for each filter, except the one being chosen from now. */
  private renderFilters(): void {
    const statuses = this.facets.status?.length ? this.facets.status : STATUSES.map(s => ({ value: s, label: s }));
    for (const [name, select] of this.selects) {
      if (select !== this.node.ownerDocument.activeElement) {
        const choices = name === 'status' ? statuses : this.facets[name] ?? [];
        setChoices(select, choices, (this.filters as Record<string, string | undefined>)[name] ?? '');
      }
    }
    this.selects.get('user')!.hidden = !((this.facets.user?.length ?? 0) > 1 || this.info?.shared);
  }

  private showNote(): void {
    const lines = [this.liveNote, this.storeNote].filter(Boolean);
    if (!lines.length && this.info && !this.rows.length) {
      const filtered = FILTERS.some(f => this.filters[f]);
      lines.push(filtered ? 'no runs match these filters' : `no runs yet in ${this.info.where}: run a %%agio cell`);
    }
    if (this.damage.length) {
      lines.push(`the store is damaged: ${this.damage[0]}` + (this.damage.length > 1 ? ` (and ${this.damage.length - 1} more)` : '') +
        ' — agio store verify; agio store repair');
    }
    this.note.replaceChildren(...lines.map(line => el(this.node.ownerDocument, 'div', [], line)));
    this.note.hidden = !lines.length;
  }

  private renderRows(): void {
    const doc = this.node.ownerDocument;
    const showUser = Boolean(this.info?.shared);
    const shown = new Set(this.rows.map(r => r.id));
    this.picked = this.picked.filter(id => shown.has(id));
    this.list.replaceChildren(...this.rows.map(r => runRow(doc, r, this.picked.includes(r.id), showUser)));
    this.diffButton.disabled = this.picked.length !== 2;
    this.footer.replaceChildren();
    if (this.cursor) {
      const more = el(doc, 'button', ['agio-runs-more'], 'Older runs') as HTMLButtonElement;
      more.type = 'button';
      more.addEventListener('click', () => void this.more());
      this.footer.append(more);
    }
    this.showNote();
  }

  private onListClick(event: MouseEvent): void {
    const target = event.target as HTMLElement;
    const row = target.closest('.agio-runs-row') as HTMLElement | null;
    if (!row) {
      return;
    }
    const runId = row.dataset.runId ?? '';
    if (target.classList.contains('agio-runs-pick')) {
      const box = target as HTMLInputElement;
      this.picked = box.checked ? [...this.picked.filter(id => id !== runId), runId].slice(-2)
        : this.picked.filter(id => id !== runId);
      for (const other of Array.from(this.list.querySelectorAll<HTMLInputElement>('.agio-runs-pick'))) {
        const id = (other.closest('.agio-runs-row') as HTMLElement).dataset.runId ?? '';
        other.checked = this.picked.includes(id);
      }
      this.diffButton.disabled = this.picked.length !== 2;
      return;
    }
    if (target.classList.contains('agio-runs-tree')) {
      this.actions.openTree(row.dataset.sessionId ?? '');
      return;
    }
    this.actions.openRun(runId);
  }
}
