/**
 * The Runs panel's client of the server extension (agio_notebook_server/runs): REST reads of the store
 * and a websocket that says when it changed. Every failure arrives as one line (`ApiError.message`).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface RunRow {
  id: string;
  session_id: string;
  agent: string | null;
  model: string | null;
  query: string;
  status: string;
  kind: string;
  attempt: number;
  superseded_by: string | null;
  parent_run_id: string | null;
  steps: number;
  tokens: number | null;
  cost: number | null;
  duration_ms: number | null;
  started_at: number;
  ended_at: number | null;
  notebook: string | null;
  notebook_path: string | null;
  user: string | null;
  error: string | null;
}

export interface StoreInfo {
  kind: string;
  where: string;
  state: string;
  shared: boolean;
  message?: string;
  user?: string | null;
  role?: string | null;
  damage?: string[];
}

export interface RunsPage {
  runs: RunRow[];
  next_cursor: string | null;
  damage?: string[];
}

export interface Choice {
  value: string;
  label: string;
}

export type Facets = Record<string, Choice[]>;

export interface MimeAnswer {
  mime_type: string;
  data: unknown;
  run?: RunRow;
  damage?: string[];
}

export interface Dashboard {
  teacher: string | null;
  students: string[];
  exercises: string[];
  cells: { user: string; exercise: string; passed: boolean; attempts: number; last_reason: string | null;
    last_time: number }[];
  failing: Record<string, { reason: string; count: number; students: number }[]>;
  latest_runs: Record<string, RunRow[]>;
  damage?: string[];
}

export interface Update {
  type: 'changed' | 'store';
  runs?: string[] | null;
  journals?: string[];
  state?: string;
  message?: string;
}

export const FILTERS = ['agent', 'status', 'notebook', 'user', 'text', 'session_id'] as const;
export type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** A failed request: its one line, and the HTTP status (404: no store yet, or no such run). */
export class ApiError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

export class RunsApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  private async get<T>(path: string, query: Record<string, string | undefined> = {}): Promise<T> {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v) {
        params.set(k, v);
      }
    }
    const qs = params.toString();
    const url = URLExt.join(this.settings.baseUrl, 'agio/api', path) + (qs ? `?${qs}` : '');
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, {}, this.settings);
    } catch (e) {
      throw new ApiError(`the Jupyter server cannot be reached (${(e as Error).message})`, 0);
    }
    const text = await response.text();
    let body: any = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!response.ok) {
      const line = body && typeof body.message === 'string' ? body.message : `${response.status} ${response.statusText}`;
      throw new ApiError(line, response.status);
    }
    return body as T;
  }

  store(): Promise<StoreInfo> {
    return this.get('store');
  }

  runs(filters: Filters, limit: number, cursor?: string | null): Promise<RunsPage> {
    return this.get('runs', { ...filters, limit: String(limit), cursor: cursor ?? undefined });
  }

  facets(): Promise<Facets> {
    return this.get('facets');
  }

  transcript(runId: string): Promise<MimeAnswer> {
    return this.get(`runs/${encodeURIComponent(runId)}`);
  }

  diff(a: string, b: string): Promise<MimeAnswer> {
    return this.get('diff', { a, b });
  }

  tree(sessionId: string): Promise<MimeAnswer> {
    return this.get(`tree/${encodeURIComponent(sessionId)}`);
  }

  progress(): Promise<Dashboard> {
    return this.get('progress');
  }

  /** The updates socket, opened again after it closes (the server restarted): `onOpen` each time. */
  follow(onUpdate: (u: Update) => void, onOpen: () => void, onClose: () => void): { dispose(): void } {
    let socket: WebSocket | null = null;
    let stopped = false;
    let delay = 250;
    const open = () => {
      if (stopped) {
        return;
      }
      let url = URLExt.join(this.settings.wsUrl, 'agio/api/updates');
      if (this.settings.appendToken && this.settings.token) {
        url += `?token=${encodeURIComponent(this.settings.token)}`;
      }
      socket = new this.settings.WebSocket(url);
      socket.onopen = () => {
        delay = 250;
        onOpen();
      };
      socket.onmessage = event => {
        try {
          onUpdate(JSON.parse(String(event.data)) as Update);
        } catch {
          // not ours: ignored
        }
      };
      socket.onclose = () => {
        socket = null;
        if (!stopped) {
          onClose();
          setTimeout(open, delay);
          delay = Math.min(delay * 2, 4000);
        }
      };
    };
    open();
    return {
      dispose: () => {
        stopped = true;
        socket?.close();
      }
    };
  }
}
