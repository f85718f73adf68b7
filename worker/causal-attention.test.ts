import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { attentionBlockSize, causalAttention } from './causal-attention.ts';
import { seededRandom } from './model.ts';

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

beforeAll(async () => {
  await selectBackend('wasm');
});

describe('causal attention (2-D matmuls, hand-written gradient, query blocks)', () => {
  const [g, t, rep, hd] = [3, 10, 2, 8];
  const q = randTensor([g, t * rep, hd]) as tf.Tensor3D;
  const k = randTensor([g, t, hd]) as tf.Tensor3D;
  const v = randTensor([g, t, hd]) as tf.Tensor3D;
  const dyWeights = randTensor([g, t * rep, hd]); // a loss that weighs every output differently
  const gradsOf = (f: (q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D) => tf.Tensor3D) =>
    tf.grads((a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(f(a as tf.Tensor3D, b as tf.Tensor3D, c as tf.Tensor3D), dyWeights)))([q, k, v]);

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
