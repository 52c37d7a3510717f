/**
 * Controls that act through the kernel: a button inserts a new code cell below its output with the
 * equivalent `%agio` command and runs it, so the notebook records what was done and the result is
 * an ordinary output.
 *
 * Renderers only dispatch a DOM event; the notebook plugin (plugin.ts) handles it. Any renderer,
 * of any MIME type, gets the same behaviour by calling `magicButton` or `requestMagic`.
 */

export const MAGIC_EVENT = 'agio-run-magic';

export interface MagicRequest {
  code: string;
}

/** Loads agio, silently before a control's `%agio` cell runs (`needsAgio`): IPython's own call behind
 * `%load_ext`, which prints nothing, also where agio is loaded already. */
export const LOAD_AGIO = 'get_ipython().extension_manager.load_extension("agio_notebook")';

/**
 * Whether a control's command needs agio loaded in the kernel first. The plugin then loads it silently
 * (no cell, no output: a kernel that has it already does nothing visible) before running the inserted
 * cell, so one click works in any kernel (restarted, or a reopened notebook whose kernel never ran
 * `%load_ext`) and the cell holds only the command.
 */
export function needsAgio(code: string): boolean {
  return code.startsWith('%agio ');
}

/** An id as a command names it: the 8 characters the transcript shows (a unique prefix of 6 or more
 * characters names a run or session everywhere), or null for one that must not reach a command line. */
export function shortArg(value: unknown): string | null {
  const id = safeArg(value);
  return id === null ? null : id.slice(0, 8);
}

/** Where a control's cells go: below the last cell inserted for the same run, so they keep click order. */
export function insertionIndex(insertedFor: (string | undefined)[], sourceIndex: number, runId: string | null): number {
  let at = sourceIndex + 1;
  if (runId) {
    for (let i = sourceIndex + 1; i < insertedFor.length; i++) {
      if (insertedFor[i] === runId) {
        at = i + 1;
      }
    }
  }
  return at;
}

/** Only these characters may reach a command line: IPython expands `$x` and `{x}` in magics. */
const SAFE_ARG = /^[A-Za-z0-9_][A-Za-z0-9_.:-]*$/;  // no leading "-": an id never reads as a flag

export function safeArg(value: unknown): string | null {
  const text = typeof value === 'number' && Number.isInteger(value) ? String(value) : value;
  return typeof text === 'string' && SAFE_ARG.test(text) ? text : null;
}

/**
 * Ask the notebook around `source` to insert and run a cell with `code`.
 * Returns false when nothing handled it (no notebook, e.g. a rendered HTML page).
 */
export function requestMagic(source: Element, code: string): boolean {
  const event = new CustomEvent<MagicRequest>(MAGIC_EVENT, { bubbles: true, cancelable: true, detail: { code } });
  source.dispatchEvent(event);
  return event.defaultPrevented;
}

/**
 * A button that runs the command `code()` builds at click time (it can read pickers beside it).
 * Unhandled, it shows the command to copy instead of doing nothing.
 */
export function magicButton(doc: Document, label: string, code: () => string, classes: string[] = []): HTMLButtonElement {
  const button = doc.createElement('button');
  button.type = 'button';
  button.classList.add('agio-magic-button', ...classes);
  button.textContent = label;
  button.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    const command = code();
    if (!requestMagic(button, command)) {
      showHint(button, command);
    }
  });
  return button;
}

function showHint(button: HTMLElement, command: string): void {
  const bar = button.parentElement ?? button;
  let hint = bar.querySelector(':scope > .agio-command-hint') as HTMLElement | null;
  if (!hint) {
    hint = button.ownerDocument.createElement('code');
    hint.classList.add('agio-command-hint');
    bar.append(hint);
  }
  hint.textContent = `run in a cell: ${command}`;
}
