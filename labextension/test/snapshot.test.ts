// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import { snapshotElement, snapshotNote, withSnapshotNote } from '../src/snapshot';

const EVIL = '<img src=x onerror="window.__pwned=1">';

describe('snapshot note', () => {
  it('says the same words as the kernel (live_output.snapshot_note)', () => {
    expect(snapshotNote('2025-01-02 03:04:05 UTC'))
      .toBe('snapshot saved while it ran, as of 2025-01-02 03:04:05 UTC: it does not update here');
  });

  it('goes over a view whose data is a snapshot, as object or JSON text, and as text only', () => {
    const view = document.createElement('div');
    for (const data of [{ status: 'running', snapshot_at: EVIL }, JSON.stringify({ snapshot_at: EVIL })]) {
      const [note, rest] = withSnapshotNote(view, data, document);
      expect(note.className).toBe('agio-snapshot');
      expect(note.textContent).toContain(EVIL);
      expect(note.querySelector('img')).toBeNull();
      expect(rest).toBe(view);
    }
  });

  it('is absent for a final view or data it cannot read', () => {
    for (const data of [{ status: 'finished' }, 'not json', null, [1], { snapshot_at: 5 }]) {
      expect(snapshotElement(data, document)).toBeNull();
    }
    const view = document.createElement('div');
    expect(withSnapshotNote(view, { status: 'finished' }, document)).toEqual([view]);
  });
});
