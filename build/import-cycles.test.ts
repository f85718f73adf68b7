/**
 * No import cycle under swarm/: modules that import each other, even for types only, cannot be read, tested or
 * moved one at a time. Every relative import of swarm/**\/*.ts counts (`import type` and `export … from` too, as
 * TypeScript's own pre-processor reports them); imports leaving swarm/ cannot close a cycle, since worker/ and p2p/
 * may not import swarm/ (eslint.config.js).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('..', import.meta.url));

type Graph = ReadonlyMap<string, readonly string[]>;

/** Every .ts file under `dir` (repo-relative, `/`-separated) with the files under `dir` it imports. */
function importGraph(dir: string): Graph {
  const files = (readdirSync(path.join(REPO, dir), { recursive: true }) as string[])
    .filter((file) => file.endsWith('.ts'))
    .map((file) => `${dir}/${file.split(path.sep).join('/')}`);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(path.join(REPO, file), 'utf8'), true, true);
    const targets = importedFiles
      .map((ref) => ref.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)))
      .filter((target) => known.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

interface Knot {
  /** Every file of the strongly connected component. */
  files: string[];
  /** One concrete cycle through it, ending where it starts: what the failure names. */
  cycle: string[];
}

/** The strongly connected components with a cycle in them (Tarjan), each with one concrete cycle through it. */
function findKnots(graph: Graph): Knot[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const knots: Knot[] = [];
  let next = 0;
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const files: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      files.push(member);
    } while (member !== node);
    if (files.length > 1 || (graph.get(node) ?? []).includes(node)) {
      files.sort();
      knots.push({ files, cycle: shortestCycle(graph, new Set(files), files[0]) });
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return knots.sort((a, b) => a.files[0].localeCompare(b.files[0]));
}

/** The shortest cycle from `start` back to it within `component` (breadth-first). */
function shortestCycle(graph: Graph, component: ReadonlySet<string>, start: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i];
    for (const to of graph.get(node) ?? []) {
      if (to === start) {
        const path = [start];
        for (let at = node; at !== start; at = cameFrom.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (component.has(to) && !cameFrom.has(to)) {
        cameFrom.set(to, node);
        queue.push(to);
      }
    }
  }
  throw new Error(`${start} is in no cycle`);
}

describe('import cycles', () => {
  it('finds and names a cycle, type-only imports included (the check can fail)', () => {
    const graph: Graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts', 'a.ts']],
      ['c.ts', ['a.ts', 'd.ts']],
      ['d.ts', []],
      ['e.ts', ['e.ts']],
    ]);
    expect(findKnots(graph)).toEqual([
      { files: ['a.ts', 'b.ts', 'c.ts'], cycle: ['a.ts', 'b.ts', 'a.ts'] },
      { files: ['e.ts'], cycle: ['e.ts', 'e.ts'] },
    ]);
    expect(findKnots(new Map([['a.ts', ['b.ts']], ['b.ts', []]]))).toEqual([]);
    const { importedFiles } = ts.preProcessFile("import type { A } from './a.ts';\nexport { b } from '../b.ts';\n", true, true);
    expect(importedFiles.map((ref) => ref.fileName)).toEqual(['./a.ts', '../b.ts']);
  });

  it('has none under swarm/', () => {
    const knots = findKnots(importGraph('swarm'));
    expect(knots.map((knot) => `${knot.cycle.join(' → ')} (${knot.files.length} files in the knot: ${knot.files.join(', ')})`)).toEqual([]);
  });
});
