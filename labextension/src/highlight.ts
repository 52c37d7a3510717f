/** Which editor language a code cell gets: `%%agio` cells hold prose (a query), not Python. */

export const AGIO_CELL_MIME = 'text/x-markdown';

const AGIO_CELL = /^%%agio(\s|$)/;

/** The MIME type for a cell starting with `%%agio`, or null to keep the kernel's language. */
export function agioCellMime(source: string): string | null {
  return AGIO_CELL.test(source.trimStart()) ? AGIO_CELL_MIME : null;
}
