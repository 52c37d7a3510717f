/** Counts in words: `1 tool call`, `2 tool calls` (agio_notebook/views/words.py says the same). */

/** `n` and `noun`, in the plural unless `n` is 1 (`plural` for irregular ones). */
export function counted(n: number, noun: string, plural?: string): string {
  return `${n} ${n === 1 ? noun : plural ?? noun + 's'}`;
}

/** A duration a person waited (a pause), in seconds with one decimal: `66.1 s`. */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
