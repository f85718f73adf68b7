import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { attentionBlockSize, causalAttention, setKeepProbsUntilBytes } from './causal-attention.ts';
import { seededRandom } from './model.ts';
import { ancestorRanges, behindTrunk, buildPrefixTree, type TreeLayout } from './prefix-tree.ts';

const rand = seededRandom(11);
const randTensor = (shape: number[]) => tf.tensor(Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rand() * 2 - 1), shape);

/** The textbook formula with tfjs's own gradients: batched matmuls, a full mask, softmax. */
function plainAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D): tf.Tensor3D {
  const [, tr, hd] = q.shape;
  const t = k.shape[1];
  const rep = tr / t;
  const mask = new Float32Array(tr * t);
  for (let row = 0; row < tr; row++) for (let j = Math.floor(row / rep) + 1; j < t; j++) mask[row * t + j] = -1e9; // row = i·rep + r
  const scores = tf.add(tf.matMul(q, k, false, true), tf.tensor2d(mask, [tr, t]));
  return tf.reshape(tf.matMul(tf.softmax(scores), v), [q.shape[0], tr, hd]) as tf.Tensor3D;
}

function maxDiff(a: tf.Tensor, b: tf.Tensor): number {
  return tf.tidy(() => tf.max(tf.abs(tf.sub(a, b))).dataSync()[0]);
}

type Attention = (q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D) => tf.Tensor3D;

/** The gradients of Σ f(q, k, v) ⊙ dyWeights with respect to q, k and v: a loss that weighs every output differently. */
function weightedGrads(f: Attention, [q, k, v]: tf.Tensor3D[], dyWeights: tf.Tensor): tf.Tensor[] {
  return tf.grads((a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(f(a as tf.Tensor3D, b as tf.Tensor3D, c as tf.Tensor3D), dyWeights)))([q, k, v]);
}

/** The prefix tree of token lists; attention needs only its layout, so no position carries a loss. */
function treeOf(samples: number[][]) {
  return buildPrefixTree(samples.map((tokens) => ({ tokens, lossMask: tokens.map(() => 0), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) })));
}

beforeAll(async () => {
  await selectBackend('wasm');
});

describe('causal attention (2-D matmuls, hand-written gradient, query blocks)', () => {
  const [g, t, rep, hd] = [3, 10, 2, 8];
  const q = randTensor([g, t * rep, hd]) as tf.Tensor3D;
  const k = randTensor([g, t, hd]) as tf.Tensor3D;
  const v = randTensor([g, t, hd]) as tf.Tensor3D;
  const dyWeights = randTensor([g, t * rep, hd]); // a loss that weighs every output differently
  const gradsOf = (f: Attention) => weightedGrads(f, [q, k, v], dyWeights);

  it('equals the textbook formula, values and gradients (per-group path, and the batched one for short sequences)', () => {
    const want = gradsOf(plainAttention);
    for (const blockSize of [t, undefined]) {
      expect(maxDiff(causalAttention(q, k, v, blockSize), plainAttention(q, k, v))).toBeLessThan(1e-5);
      const got = gradsOf((a, b, c) => causalAttention(a, b, c, blockSize));
      for (let i = 0; i < 3; i++) expect(maxDiff(got[i], want[i])).toBeLessThan(1e-4);
    }
  });

  it('in small query blocks gives what one block gives, gradients included', () => {
    for (const blockSize of [1, 3, 4]) {
      expect(maxDiff(causalAttention(q, k, v, blockSize), causalAttention(q, k, v, t))).toBeLessThan(1e-5);
      const want = gradsOf((a, b, c) => causalAttention(a, b, c, t));
      const got = gradsOf((a, b, c) => causalAttention(a, b, c, blockSize));
      for (let i = 0; i < 3; i++) expect(maxDiff(got[i], want[i])).toBeLessThan(1e-5);
    }
  });

  it('cuts long sequences into blocks whose scores fit the budget', () => {
    expect(attentionBlockSize(256, 2)).toBe(256); // the default context: one block
    const block = attentionBlockSize(6144, 2);
    expect(block).toBeLessThan(6144);
    expect(block * 2 * 6144).toBeLessThanOrEqual(1 << 22);
  });
});

describe('tree attention (each position sees its ancestors: a packed prefix tree)', () => {
  // A trie of five samples: a 9-token trunk, branches at depths 9, 4 and 11, one sample identical to another, and a
  // root of its own; 38 nodes in depth-first order.
  const trunk = [1, 2, 3, 4, 5, 6, 7, 8, 9];
  const sampleTokens = [
    [...trunk, 20, 21, 22, 23],
    [...trunk, 30, 31],
    [...trunk.slice(0, 4), 40, 41, 42, 43, 44],
    [...trunk, 20, 21, 50, 51, 52],
    [60, 61, 62, 63, 64, 65, 66],
    [...trunk, 30, 31],
  ];
  const tree = treeOf(sampleTokens);
  const t = tree.ids.length;
  const [g, rep, hd] = [2, 2, 8];
  const q = randTensor([g, t * rep, hd]) as tf.Tensor3D;
  const k = randTensor([g, t, hd]) as tf.Tensor3D;
  const v = randTensor([g, t, hd]) as tf.Tensor3D;
  const dyWeights = randTensor([g, t * rep, hd]);
  const gradsOf = (f: Attention) => weightedGrads(f, [q, k, v], dyWeights);

  /** The textbook formula with a full ancestor mask built from parent links alone. */
  function ancestorMaskAttention(qa: tf.Tensor3D, ka: tf.Tensor3D, va: tf.Tensor3D): tf.Tensor3D {
    const mask = new Float32Array(t * rep * t).fill(-1e9);
    for (let i = 0; i < t; i++) {
      for (let j = i; j >= 0; j = tree.parent[j]) for (let r = 0; r < rep; r++) mask[(i * rep + r) * t + j] = 0;
    }
    return tf.matMul(tf.softmax(tf.add(tf.matMul(qa, ka, false, true), tf.tensor2d(mask, [t * rep, t]))), va);
  }

  it('packs shared prefixes once and finds each node\'s ancestors as a few ranges', () => {
    expect(t).toBe(9 + 4 + 2 + 5 + 3 + 7);
    const last = tree.ids.indexOf(52);
    expect(ancestorRanges(tree, last).reduce((a, r) => a + r.end - r.start, 0)).toBe(tree.depth[last] + 1);
    expect(ancestorRanges(tree, last)).toHaveLength(2); // the trunk + 20 21 chain, then the 50 51 52 branch
  });

  it('equals the ancestor-masked formula, values and gradients, in any block size', () => {
    const want = ancestorMaskAttention(q, k, v);
    const wantGrads = gradsOf(ancestorMaskAttention);
    for (const blockSize of [undefined, t, 1, 3, 5, 8]) {
      expect(maxDiff(causalAttention(q, k, v, blockSize, tree), want), `block ${blockSize}`).toBeLessThan(1e-5);
      const got = gradsOf((a, b, c) => causalAttention(a, b, c, blockSize, tree));
      for (let i = 0; i < 3; i++) expect(maxDiff(got[i], wantGrads[i]), `block ${blockSize}, grad ${i}`).toBeLessThan(1e-4);
    }
  });

  it('differs from causal attention over the same packed sequence (the mask matters)', () => {
    expect(maxDiff(causalAttention(q, k, v, t, tree), causalAttention(q, k, v, t))).toBeGreaterThan(1e-2);
  });

  it('of one chain is causal attention', () => {
    const chain = treeOf([trunk]);
    const [qc, kc, vc] = [randTensor([g, 9 * rep, hd]), randTensor([g, 9, hd]), randTensor([g, 9, hd])] as tf.Tensor3D[];
    for (const blockSize of [9, 2]) expect(maxDiff(causalAttention(qc, kc, vc, blockSize, chain), causalAttention(qc, kc, vc, blockSize))).toBeLessThan(1e-6);
  });
});

describe('queries behind a trunk (keys in front that have no query here)', () => {
  // A tree with two roots and a branch, behind a 6-token trunk: every node sees the whole trunk, then its ancestors.
  const own = treeOf([[1, 2, 3, 4], [1, 2, 5, 6, 7], [8, 9, 10]]);
  const trunkLength = 6;
  const [g, rep, hd] = [2, 2, 8];

  /** The textbook formula for queries [offset, T) with the mask built from parent links alone (causal: j ≤ i). */
  function reference(layout: TreeLayout | null, offset: number, t: number) {
    return (qa: tf.Tensor3D, ka: tf.Tensor3D, va: tf.Tensor3D): tf.Tensor3D => {
      const rows = (t - offset) * rep;
      const mask = new Float32Array(rows * t).fill(-1e9);
      for (let i = offset; i < t; i++) {
        for (let j = i; j >= 0; j = layout ? layout.parent[j] : j - 1) for (let r = 0; r < rep; r++) mask[((i - offset) * rep + r) * t + j] = 0;
      }
      return tf.matMul(tf.softmax(tf.add(tf.matMul(qa, ka, false, true), tf.tensor2d(mask, [rows, t]))), va);
    };
  }

  for (const [name, layout, t] of [
    ['a tree', behindTrunk(own, trunkLength), trunkLength + own.ids.length],
    ['one chain (causal)', null, trunkLength + treeOf([[1, 2, 3, 4, 5, 6, 7]]).ids.length],
  ] as const) {
    it(`equals the masked formula for ${name}, values and gradients (the trunk's keys included), in any block size`, () => {
      const q = randTensor([g, (t - trunkLength) * rep, hd]) as tf.Tensor3D;
      const k = randTensor([g, t, hd]) as tf.Tensor3D;
      const v = randTensor([g, t, hd]) as tf.Tensor3D;
      const dyWeights = randTensor([g, (t - trunkLength) * rep, hd]);
      const gradsOf = (f: Attention) => weightedGrads(f, [q, k, v], dyWeights);
      const want = reference(layout, trunkLength, t);
      const wantGrads = gradsOf(want);
      // The trunk's keys get a gradient: they are seen by every query.
      expect(tf.tidy(() => tf.max(tf.abs(tf.slice(wantGrads[1], [0, 0, 0], [g, trunkLength, hd]))).dataSync()[0])).toBeGreaterThan(1e-3);
      for (const blockSize of [undefined, t, 1, 3, 5]) {
        expect(maxDiff(causalAttention(q, k, v, blockSize, layout, trunkLength), want(q, k, v)), `block ${blockSize}`).toBeLessThan(1e-5);
        const got = gradsOf((a, b, c) => causalAttention(a, b, c, blockSize, layout, trunkLength));
        for (let i = 0; i < 3; i++) expect(maxDiff(got[i], wantGrads[i]), `block ${blockSize}, grad ${i}`).toBeLessThan(1e-4);
      }
    });
  }

  it('refuses query rows that do not fit the positions after the offset', () => {
    const k = randTensor([g, 10, hd]) as tf.Tensor3D;
    expect(() => causalAttention(randTensor([g, 7, hd]) as tf.Tensor3D, k, k, undefined, null, 6)).toThrow(RangeError);
  });
});

describe('probabilities kept from the forward for the backward (below a memory bound), or recomputed', () => {
  const tokens = [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 9, 10, 11], [1, 2, 3, 4, 5, 12, 13]];
  const tree = treeOf(tokens);
  const t = tree.ids.length;
  const [g, rep, hd] = [2, 2, 8];
  const q = randTensor([g, t * rep, hd]) as tf.Tensor3D;
  const k = randTensor([g, t, hd]) as tf.Tensor3D;
  const v = randTensor([g, t, hd]) as tf.Tensor3D;
  const dyWeights = randTensor([g, t * rep, hd]);
  const gradsOf = (layout: TreeLayout | null, blockSize: number) => weightedGrads((a, b, c) => causalAttention(a, b, c, blockSize, layout), [q, k, v], dyWeights);
  /** Runs `f` with the bound set to `bytes`, restoring the default after. */
  async function withBound<T>(bytes: number, f: () => Promise<T> | T): Promise<T> {
    const previous = setKeepProbsUntilBytes(bytes);
    try {
      return await f();
    } finally {
      setKeepProbsUntilBytes(previous);
    }
  }
  const softmaxKernels = async (layout: TreeLayout | null, blockSize: number) => {
    const info = await tf.profile(() => gradsOf(layout, blockSize));
    tf.dispose(info.result as tf.Tensor[]);
    return info.kernels.filter((kernel) => kernel.name === 'Softmax').length;
  };

  it('gives the same gradients either way, for a tree and for causal attention, in any block size', async () => {
    for (const layout of [tree, null]) {
      for (const blockSize of [t, 1, 4]) {
        const kept = gradsOf(layout, blockSize);
        const recomputed = await withBound(0, () => gradsOf(layout, blockSize));
        for (let i = 0; i < 3; i++) expect(maxDiff(kept[i], recomputed[i]), `block ${blockSize}, grad ${i}`).toBeLessThan(1e-6);
        tf.dispose([...kept, ...recomputed]);
      }
    }
  });

  it('keeps them when the bound allows: the backward runs no softmax of its own', async () => {
    for (const blockSize of [t, 4]) {
      const forwardOnly = await softmaxKernels(tree, blockSize);
      expect(forwardOnly).toBeGreaterThan(0);
      expect(await withBound(0, () => softmaxKernels(tree, blockSize))).toBe(2 * forwardOnly);
    }
  });

  it('leaves no tensor behind either way, nor in a forward without a gradient', async () => {
    for (const bytes of [0, 2 ** 30]) {
      await withBound(bytes, () => {
        const before = tf.memory().numTensors;
        tf.dispose(gradsOf(tree, 4));
        tf.dispose(causalAttention(q, k, v, 4, tree));
        expect(tf.memory().numTensors).toBe(before);
      });
    }
  });
});
