/**
 * The Runs panel's main-area tabs: a run's transcript, a diff of two runs, a session's tree, and the class
 * dashboard. Each draws what the server sent with the renderer a notebook output of the same kind uses
 * (render.ts for transcripts, explore.ts for diffs and trees), and reads again when the store changes.
 */
import { Widget } from '@lumino/widgets';

import { el } from './dom';
import { renderDiff, renderTree } from './explore';
import { renderTranscript } from './render';
import type { Dashboard, MimeAnswer, RunRow, RunsApi } from './runs_api';
import { renderDashboard } from './runs_dashboard';
import { firstWords, when } from './runs_list';

/** A tab that reads an answer from the server and draws it; `reload` reads again (one read at a time). */
export abstract class StoreTab<T> extends Widget {
  protected readonly body: HTMLElement;
  protected readonly note: HTMLElement; // why the last read failed (cleared by the next read that works)
  protected readonly hint: HTMLElement; // what an action asks of the reader (kept until the next one)
  private reading: Promise<void> | null = null;
  private again = false;

  constructor(readonly api: RunsApi, kind: string) {
    super();
    this.addClass('agio-runs-tab');
    this.addClass(`agio-runs-${kind}-view`);
    this.note = el(this.node.ownerDocument, 'div', ['agio-runs-note']);
    this.note.hidden = true;
    this.hint = el(this.node.ownerDocument, 'div', ['agio-runs-note', 'agio-runs-hint']);
    this.hint.hidden = true;
    this.body = el(this.node.ownerDocument, 'div', ['agio-runs-tab-body', 'jp-AgioRun']);
    this.node.append(this.note, this.hint, this.body);
  }

  protected abstract read(): Promise<T>;
  protected abstract draw(answer: T): void;

  /** Whether a change to the store should be read (a finished run's transcript will not change). */
  wantsUpdates(): boolean {
    return true;
  }

  reload(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = this.read().then(answer => {
      this.note.hidden = true;
      this.draw(answer);
    }, (e: Error) => {
      this.note.textContent = e.message;
      this.note.hidden = false;
    }).finally(() => {
      this.reading = null;
      if (this.again) {
        this.again = false;
        void this.reload();
      }
    });
    return this.reading;
  }

  /** A line for the reader about what they just did, with elements after it (a button). */
  say(line: string, ...after: HTMLElement[]): void {
    this.hint.replaceChildren(line, ...after.flatMap(e => [' ', e]));
    this.hint.hidden = !line;
  }
}

export class TranscriptTab extends StoreTab<MimeAnswer> {
  run: RunRow | null = null;

  constructor(api: RunsApi, readonly runId: string) {
    super(api, 'transcript');
    this.id = `agio-run-${runId}`;
    this.title.label = `run ${runId.slice(0, 8)}`;
    this.title.closable = true;
  }

  protected read(): Promise<MimeAnswer> {
    return this.api.transcript(this.runId);
  }

  protected draw(answer: MimeAnswer): void {
    this.run = answer.run ?? null;
    if (this.run) {
      this.title.label = `${this.run.agent ?? 'run'}: ${firstWords(this.run.query, 4)}`;
      this.title.caption = `run ${this.run.id} · ${this.run.status}` + (this.run.user ? ` · ${this.run.user}` : '');
    }
    const doc = this.node.ownerDocument;
    const where = el(doc, 'div', ['agio-runs-origin']);
    if (this.run) {
      where.textContent = [this.run.user ? `by ${this.run.user}` : '', this.run.notebook_path || this.run.notebook
        ? `in ${this.run.notebook_path ?? this.run.notebook}` : '', when(this.run.started_at)].filter(Boolean).join(' · ');
    }
    this.body.replaceChildren(where, renderTranscript(answer.data, doc));
  }

  wantsUpdates(): boolean {
    return this.run === null || this.run.status === 'running';
  }
}

/** A tab drawing one MIME answer with the renderer a notebook output of that type uses. */
class MimeTab extends StoreTab<MimeAnswer> {
  constructor(api: RunsApi, kind: string, id: string, label: string, private ask: () => Promise<MimeAnswer>,
    private render: (data: unknown, doc: Document) => HTMLElement) {
    super(api, kind);
    this.id = id;
    this.title.label = label;
    this.title.closable = true;
  }

  protected read(): Promise<MimeAnswer> {
    return this.ask();
  }

  protected draw(answer: MimeAnswer): void {
    this.body.replaceChildren(this.render(answer.data, this.node.ownerDocument));
  }

  /** A diff or a tree is read when opened (again from the panel): it reads the sessions it draws whole. */
  wantsUpdates(): boolean {
    return false;
  }
}

/** Two runs side by side (explore.ts's diff). */
export function diffTab(api: RunsApi, a: string, b: string): StoreTab<MimeAnswer> {
  return new MimeTab(api, 'diff', `agio-diff-${a}-${b}`, `diff ${a.slice(0, 6)} ↔ ${b.slice(0, 6)}`,
    () => api.diff(a, b), renderDiff);
}

/** A session's runs, retries and forks (explore.ts's tree). */
export function treeTab(api: RunsApi, sessionId: string): StoreTab<MimeAnswer> {
  return new MimeTab(api, 'tree', `agio-tree-${sessionId}`, `tree ${sessionId.slice(0, 8)}`,
    () => api.tree(sessionId), renderTree);
}

export class DashboardTab extends StoreTab<Dashboard> {
  constructor(api: RunsApi, private openRun: (runId: string) => void) {
    super(api, 'dashboard');
    this.id = 'agio-class-dashboard';
    this.title.label = 'Class dashboard';
    this.title.closable = true;
    this.body.addEventListener('click', event => {
      const row = (event.target as HTMLElement).closest('.agio-runs-row') as HTMLElement | null;
      if (row?.dataset.runId && !(event.target as HTMLElement).classList.contains('agio-runs-tree')) {
        this.openRun(row.dataset.runId);
      }
    });
  }

  protected read(): Promise<Dashboard> {
    return this.api.progress();
  }

  protected draw(answer: Dashboard): void {
    this.body.replaceChildren(renderDashboard(this.node.ownerDocument, answer));
  }
}
