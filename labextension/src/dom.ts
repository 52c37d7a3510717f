/** The DOM helpers every renderer shares: text reaches the page through textContent only. */

/** An element with classes and, optionally, text (never markup). */
export function el(doc: Document, tag: string, classes: string[] = [], text?: string): HTMLElement {
  const node = doc.createElement(tag);
  node.classList.add(...classes);
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A status, role or kind as a safe class-name suffix (the values come from the transcript). */
export function classToken(value: unknown): string {
  return String(value ?? '').replace(/[^a-z_]/g, '');
}
