/**
 * Tree packing: the samples of a micro-batch inserted into a token trie and laid out depth-first as one sequence,
 * so that a prefix several samples share (a GRPO group's system prompt, tool declarations and task; a team's
 * common context; the trunk of an episode whose agent rewrote its memory) is computed once.
 *
 * Exactness. A node's hidden state depends only on the tokens of its path, so every sample through a node sees the
 * same state there, and the logits at a node predict each of its children for every sample that continues through
 * it. The loss is therefore kept apart from the nodes: each generated token of each sample (loss mask 1) is one
 * loss entry — (the node whose logits predict it, the token, its advantage, its old logprob) — so identical
 * generated tokens in several samples share a node but keep their own advantage and old logprob. The token-sum of
 * the entries is the token-sum of the samples, term by term.
 *
 * Layout. Depth-first order puts a node's first child right after it, so a chain of first children is a contiguous
 * range; a node's ancestors are the start of its own chain up to itself, plus the ancestors of the parent its chain
 * hangs from: a few contiguous ranges (one per branch point on the path). RoPE positions are depths: a token sits
 * at the position it has in its own sample.
 */
import type { TrainSample } from './common/engine.ts';

/** A half-open range [start, end) of positions in the packed sequence. */
export interface PositionRange {
  start: number;
  end: number;
}

/** The attention structure of a packed tree: who is whose parent, and where chains start (see the module comment). */
export interface TreeLayout {
  /** Parent node index, −1 for a root [N]. */
  parent: Int32Array;
  /** First node of the chain of first children that node i belongs to [N]. */
  chainStart: Int32Array;
  /** Each node's position in its own sample, 0 at a root [N]: the RoPE position. */
  depth: Int32Array;
}

export interface PackedTree extends TreeLayout {
  /** Tokens in depth-first order [N]. */
  ids: Int32Array;
  /** Per loss entry [E]: the node whose logits predict the entry's token (the token's parent node). */
  entryNode: Int32Array;
  entryTarget: Int32Array;
  entryAdvantage: Float32Array;
  entryOldLogprob: Float32Array;
  /** Σ sample lengths: what packing the samples as rows would have computed (before padding). */
  sampleTokens: number;
}

interface TrieNode {
  token: number;
  depth: number;
  children: Map<number, TrieNode>;
  /** Child insertion order, for a deterministic layout. */
  order: TrieNode[];
  index: number;
}

function newNode(token: number, depth: number): TrieNode {
  return { token, depth, children: new Map(), order: [], index: -1 };
}

/** The trie of `samples`, packed depth-first, with one loss entry per generated token of each sample. */
export function buildPrefixTree(samples: readonly TrainSample[]): PackedTree {
  const root = newNode(-1, -1);
  /** Per sample, the trie node of each of its positions. */
  const paths: TrieNode[][] = samples.map((s) => {
    const path: TrieNode[] = [];
    let node = root;
    for (const token of s.tokens) {
      let child = node.children.get(token);
      if (!child) {
        child = newNode(token, node.depth + 1);
        node.children.set(token, child);
        node.order.push(child);
      }
      path.push(child);
      node = child;
    }
    return path;
  });

  // Depth-first layout (explicit stack: a sample of thousands of tokens is a chain that deep).
  const ordered: TrieNode[] = [];
  const parents: number[] = [];
  const stack: { node: TrieNode; parent: number }[] = [];
  for (let i = root.order.length - 1; i >= 0; i--) stack.push({ node: root.order[i], parent: -1 });
  while (stack.length > 0) {
    const { node, parent } = stack.pop()!;
    node.index = ordered.length;
    ordered.push(node);
    parents.push(parent);
    for (let i = node.order.length - 1; i >= 0; i--) stack.push({ node: node.order[i], parent: node.index });
  }

  const n = ordered.length;
  const ids = new Int32Array(n);
  const depth = new Int32Array(n);
  const parent = Int32Array.from(parents);
  const chainStart = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    ids[i] = ordered[i].token;
    depth[i] = ordered[i].depth;
    // A first child follows its parent directly and continues the parent's chain.
    chainStart[i] = parent[i] >= 0 && parent[i] === i - 1 ? chainStart[i - 1] : i;
  }

  let entries = 0;
  for (const s of samples) for (let t = 1; t < s.tokens.length; t++) if (s.lossMask[t]) entries++;
  const entryNode = new Int32Array(entries);
  const entryTarget = new Int32Array(entries);
  const entryAdvantage = new Float32Array(entries);
  const entryOldLogprob = new Float32Array(entries);
  let e = 0;
  samples.forEach((s, si) => {
    const path = paths[si];
    for (let t = 1; t < s.tokens.length; t++) {
      if (!s.lossMask[t]) continue;
      entryNode[e] = path[t - 1].index;
      entryTarget[e] = s.tokens[t];
      entryAdvantage[e] = s.advantages[t];
      entryOldLogprob[e] = s.oldLogprobs[t];
      e++;
    }
  });
  const sampleTokens = samples.reduce((a, s) => a + s.tokens.length, 0);
  return { ids, depth, parent, chainStart, entryNode, entryTarget, entryAdvantage, entryOldLogprob, sampleTokens };
}

/** Node i's ancestors and itself as ascending, disjoint ranges of the packed sequence. */
export function ancestorRanges(layout: TreeLayout, i: number): PositionRange[] {
  const ranges: PositionRange[] = [];
  let end = i;
  while (end >= 0) {
    const start = layout.chainStart[end];
    ranges.push({ start, end: end + 1 });
    end = layout.parent[start];
  }
  return ranges.reverse();
}

/** Length of the longest common prefix of two token lists. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Lexicographic order of token lists (a prefix first): the order of a trie's depth-first walk. */
export function compareTokens(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/**
 * Split samples into micro-batches of at most `tokenBudget` tree nodes each, at subtree boundaries: samples in
 * lexicographic token order (the trie's depth-first order), cut greedily. In that order a sample adds its length
 * minus its common prefix with the one before it to a trie, so each micro-batch's size is known without building it.
 * A sample longer than the budget gets a micro-batch of its own; a prefix two micro-batches share is computed in
 * both (it is context for each).
 */
export function packTreeMicroBatches<T extends { tokens: readonly number[] }>(samples: readonly T[], tokenBudget: number): T[][] {
  const sorted = [...samples].sort((a, b) => compareTokens(a.tokens, b.tokens));
  const batches: T[][] = [];
  let current: T[] = [];
  let nodes = 0;
  for (const s of sorted) {
    const added = current.length > 0 ? s.tokens.length - commonPrefix(current[current.length - 1].tokens, s.tokens) : s.tokens.length;
    if (current.length > 0 && nodes + added > tokenBudget) {
      batches.push(current);
      current = [];
      nodes = 0;
    }
    nodes += current.length > 0 ? added : s.tokens.length;
    current.push(s);
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Tree nodes a set of samples packs into (Σ over micro-batches at `tokenBudget`, or one trie when omitted). */
export function treeTokenCount(samples: readonly { tokens: readonly number[] }[], tokenBudget = Infinity): number {
  let total = 0;
  for (const group of packTreeMicroBatches(samples, tokenBudget)) {
    total += group.reduce((sum, s, i) => sum + s.tokens.length - (i > 0 ? commonPrefix(group[i - 1].tokens, s.tokens) : 0), 0);
  }
  return total;
}
