/**
 * The note over an agio view saved while its run or batch went on (the data carries `snapshot_at`,
 * set by agio_notebook/notebook/live_output.py, whose `snapshot_note` says the same): the view is a
 * snapshot of that moment, not the live widget, which needs the kernel that ran it.
 */
import { el } from './dom';

/** What a snapshot says of itself. */
export function snapshotNote(at: string): string {
  return `snapshot saved while it ran, as of ${at}: it does not update here`;
}

/** The note for a view's data, or null when the data is not a snapshot. */
export function snapshotElement(data: unknown, doc: Document): HTMLElement | null {
  let value = data;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return null;
    }
  }
  const at = value && typeof value === 'object' ? (value as Record<string, unknown>).snapshot_at : undefined;
  return typeof at === 'string' ? el(doc, 'div', ['agio-snapshot'], snapshotNote(at)) : null;
}

/** `view` with the snapshot note over it when `data` is a snapshot. */
export function withSnapshotNote(view: HTMLElement, data: unknown, doc: Document): HTMLElement[] {
  const note = snapshotElement(data, doc);
  return note ? [note, view] : [view];
}
