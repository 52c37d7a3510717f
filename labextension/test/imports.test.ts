// No two source files import each other (the project's style; the Python side is checked by import-linter).
import { readdirSync, readFileSync } from 'fs';
import { resolve } from 'path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(__dirname, '../src');

function imports(file: string): string[] {
  const text = readFileSync(resolve(SRC, file), 'utf8');
  return [...text.matchAll(/from '\.\/(\w+)'/g)].map(m => `${m[1]}.ts`);
}

describe('the extension source', () => {
  it('has no two files importing each other', () => {
    const files = readdirSync(SRC).filter(f => f.endsWith('.ts'));
    const graph = new Map(files.map(f => [f, new Set(imports(f))]));
    const pairs = files.flatMap(a => [...graph.get(a)!].filter(b => a < b && graph.get(b)?.has(a)).map(b => `${a} <-> ${b}`));
    expect(pairs).toEqual([]);
    expect(graph.get('render.ts')!.has('debugger.ts')).toBe(true); // the pair that used to: now one way only
  });
});
