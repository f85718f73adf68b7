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
 *
 * Trunks. Micro-batches cut the samples at subtree boundaries, so a prefix that the samples of several micro-batches
 * share (a GRPO group's opening, once its timelines are too long to share a micro-batch) would be context in each.
 * planTreeRuns finds such a prefix, a trunk, computed once per step in a pass of its own; the micro-batches behind
 * it hold their samples' suffixes, their depths continuing after the trunk, and see its keys as ancestors of every
 * node (train.ts and trunk.ts do the passes).
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
 * both (it is context for each) unless a trunk takes it (planTreeRuns).
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

// ---------------------------------------------------------------------------------------------------------------
// Trunks: a prefix shared across micro-batches, computed once per step (worker/trunk.ts trains them).

/**
 * The shortest trunk worth a pass of its own: a trunk costs two extra passes over its tokens (its keys and values
 * without a gradient, then its backward) and a few dozen ops per pass whatever its length, so below a few dozen
 * shared tokens recomputing them in each micro-batch is as cheap.
 */
export const MIN_TRUNK_TOKENS = 64;

/**
 * Micro-batches that train together. With a trunk (`trunkLength` > 0) every sample of every micro-batch starts with
 * the same `trunkLength + 1` tokens: the first `trunkLength` are computed once, in the trunk's pass, and each
 * micro-batch trains its samples from position `trunkLength` on (the last shared token is each suffix tree's root,
 * so the trunk holds only the loss entries it predicts itself). Without one, a run is one plain micro-batch.
 */
export interface TreeRun<T> {
  trunkLength: number;
  microBatches: T[][];
}

/** Trie nodes of token lists in lexicographic order: Σ length − common prefix with the list before. */
function trieSize(lists: readonly (readonly number[])[]): number {
  return lists.reduce((sum, l, i) => sum + l.length - (i > 0 ? commonPrefix(lists[i - 1], l) : 0), 0);
}

/** The prefix every list shares, for lists in lexicographic order: the least common prefix of neighbours. */
function sortedCommonPrefix(lists: readonly (readonly number[])[]): number {
  return lists.reduce((lcp, l, i) => Math.min(lcp, i > 0 ? commonPrefix(lists[i - 1], l) : l.length), Infinity);
}

/**
 * Plan a step's tree micro-batches with trunks (one trunk level). The samples are cut as packTreeMicroBatches cuts
 * them; then consecutive micro-batches are grouped into runs, each run's trunk being its samples' common prefix less
 * its last token, so as to save the most recomputed tokens (Σ (micro-batches − 1) · trunk over the runs; a dynamic
 * programme over the cut points, O(micro-batches²)). A run with a trunk of at least MIN_TRUNK_TOKENS is packed again
 * by the budget over its samples' suffixes (the trunk no longer counts against a micro-batch's activations, so more
 * samples fit); every other micro-batch stays as it was, a run of its own without a trunk.
 */
export function planTreeRuns<T extends { tokens: readonly number[] }>(samples: readonly T[], tokenBudget: number): TreeRun<T>[] {
  const batches = packTreeMicroBatches(samples, tokenBudget);
  const m = batches.length;
  // Common prefix within each micro-batch, and across each cut (last sample of one, first of the next).
  const inner = batches.map((b) => sortedCommonPrefix(b.map((s) => s.tokens)));
  const across = batches.slice(1).map((b, i) => commonPrefix(batches[i][batches[i].length - 1].tokens, b[0].tokens));
  // best[e]: the most tokens saved by runs over batches [0, e); from[e]: where the last of those runs starts.
  const best = new Float64Array(m + 1);
  const from = new Int32Array(m + 1);
  const trunkOf = (lcp: number) => (lcp - 1 >= MIN_TRUNK_TOKENS ? lcp - 1 : 0);
  for (let e = 1; e <= m; e++) {
    best[e] = best[e - 1];
    from[e] = e - 1;
    let lcp = inner[e - 1];
    for (let s = e - 2; s >= 0; s--) {
      lcp = Math.min(lcp, across[s], inner[s]);
      const trunk = trunkOf(lcp);
      if (trunk === 0) break; // the common prefix only shrinks as the run grows
      const saved = best[s] + (e - 1 - s) * trunk;
      if (saved > best[e]) {
        best[e] = saved;
        from[e] = s;
      }
    }
  }
  const runs: TreeRun<T>[] = [];
  for (let e = m; e > 0; e = from[e]) {
    const s = from[e];
    if (e - s === 1) {
      runs.push({ trunkLength: 0, microBatches: [batches[s]] });
      continue;
    }
    const members = batches.slice(s, e).flat();
    const trunkLength = trunkOf(sortedCommonPrefix(members.map((item) => item.tokens)));
    const suffixes = packTreeMicroBatches(
      members.map((item) => ({ tokens: item.tokens.slice(trunkLength), item })),
      tokenBudget,
    );
    runs.push({ trunkLength, microBatches: suffixes.map((b) => b.map((x) => x.item)) });
  }
  return runs.reverse();
}

/** Tree nodes a set of samples packs into (the trunks of planTreeRuns at `tokenBudget` once; one trie when omitted). */
export function treeTokenCount(samples: readonly { tokens: readonly number[] }[], tokenBudget = Infinity): number {
  let total = 0;
  for (const run of planTreeRuns(samples, tokenBudget)) {
    total += run.trunkLength;
    for (const group of run.microBatches) total += trieSize(group.map((s) => s.tokens.slice(run.trunkLength)));
  }
  return total;
}

/**
 * A trunk as a packed tree of one chain: its first `length` tokens (every sample's), and one loss entry per generated
 * token of each sample at positions 1..length — the tokens the trunk's own nodes predict, each with its sample's
 * advantage and old logprob.
 */
export function buildTrunk(samples: readonly TrainSample[], length: number): PackedTree {
  if (samples.length === 0 || length < 1) throw new RangeError(`a trunk needs samples and at least one token (got ${samples.length} samples, ${length} tokens)`);
  const ids = Int32Array.from(samples[0].tokens.slice(0, length));
  for (const s of samples) {
    if (s.tokens.length <= length || commonPrefix(s.tokens.slice(0, length + 1), samples[0].tokens) <= length) throw new RangeError(`a sample does not continue the trunk's ${length + 1} shared tokens`);
  }
  const entries: { node: number; sample: TrainSample; t: number }[] = [];
  for (const s of samples) for (let t = 1; t <= length; t++) if (s.lossMask[t]) entries.push({ node: t - 1, sample: s, t });
  return {
    ids,
    parent: Int32Array.from({ length }, (_, i) => i - 1),
    chainStart: new Int32Array(length),
    depth: Int32Array.from({ length }, (_, i) => i),
    entryNode: Int32Array.from(entries, (e) => e.node),
    entryTarget: Int32Array.from(entries, (e) => e.sample.tokens[e.t]),
    entryAdvantage: Float32Array.from(entries, (e) => e.sample.advantages[e.t]),
    entryOldLogprob: Float32Array.from(entries, (e) => e.sample.oldLogprobs[e.t]),
    sampleTokens: length,
  };
}

/** Samples from position `from` on: what a micro-batch behind a trunk of `from` tokens trains. */
export function suffixSamples(samples: readonly TrainSample[], from: number): TrainSample[] {
  return samples.map((s) => ({ tokens: s.tokens.slice(from), lossMask: s.lossMask.slice(from), advantages: s.advantages.slice(from), oldLogprobs: s.oldLogprobs.slice(from) }));
}

/**
 * The tree of samples behind a trunk of `trunkLength` tokens: the trie of their suffixes from that position on, its
 * depths (RoPE positions) offset by the trunk. Its loss entries are the tokens at positions > trunkLength.
 */
export function buildSuffixTree(samples: readonly TrainSample[], trunkLength: number): PackedTree {
  const tree = buildPrefixTree(suffixSamples(samples, trunkLength));
  return { ...tree, depth: tree.depth.map((d) => d + trunkLength), sampleTokens: samples.reduce((a, s) => a + s.tokens.length, 0) };
}

/**
 * A layout with a chain of `trunkLength` nodes in front (positions 0..trunkLength − 1) and `tree` behind it, each of
 * its roots a child of the chain's last node: the keys a micro-batch behind a trunk attends over (the trunk is an
 * ancestor of every node). Depths are the tree's own (already past the trunk).
 */
export function behindTrunk(tree: TreeLayout, trunkLength: number): TreeLayout {
  const n = tree.parent.length;
  const parent = new Int32Array(trunkLength + n);
  const chainStart = new Int32Array(trunkLength + n);
  const depth = new Int32Array(trunkLength + n);
  for (let i = 0; i < trunkLength + n; i++) {
    if (i < trunkLength) {
      parent[i] = i - 1;
      depth[i] = i;
    } else {
      const p = tree.parent[i - trunkLength];
      parent[i] = p >= 0 ? p + trunkLength : trunkLength - 1;
      depth[i] = tree.depth[i - trunkLength];
    }
    chainStart[i] = parent[i] >= 0 && parent[i] === i - 1 ? chainStart[i - 1] : i;
  }
  return { parent, chainStart, depth };
}
