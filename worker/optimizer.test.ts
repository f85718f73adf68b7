import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { AdamW, clipScale, globalNorm, learningRateAt } from './optimizer.ts';

beforeAll(async () => {
  await selectBackend('wasm');
});

describe('AdamW', () => {
  it('matches a scalar reference implementation, decaying matrices only', () => {
    const w = tf.variable(tf.tensor2d([[0.5, -1], [2, 0]]));
    const b = tf.variable(tf.tensor1d([1, -2]));
    const opt = new AdamW([w, b], { beta1: 0.9, beta2: 0.95, eps: 1e-8 });
    const ref = { w: [0.5, -1, 2, 0], b: [1, -2], m: [0, 0, 0, 0, 0, 0], v: [0, 0, 0, 0, 0, 0] };
    const grads = [
      [0.1, -0.2, 0.3, 0.4, -0.5, 0.6],
      [0.2, 0.1, -0.1, 0.3, 0.5, -0.2],
    ];
    grads.forEach((g, step) => {
      opt.step([tf.tensor2d(g.slice(0, 4), [2, 2]), tf.tensor1d(g.slice(4))], 0.01, 0.1);
      const p = [...ref.w, ...ref.b];
      for (let i = 0; i < 6; i++) {
        ref.m[i] = 0.9 * ref.m[i] + 0.1 * g[i];
        ref.v[i] = 0.95 * ref.v[i] + 0.05 * g[i] * g[i];
        const mh = ref.m[i] / (1 - 0.9 ** (step + 1));
        const vh = ref.v[i] / (1 - 0.95 ** (step + 1));
        p[i] -= 0.01 * (mh / (Math.sqrt(vh) + 1e-8) + (i < 4 ? 0.1 * p[i] : 0));
      }
      ref.w = p.slice(0, 4);
      ref.b = p.slice(4);
    });
    Array.from(w.dataSync()).forEach((x, i) => expect(x).toBeCloseTo(ref.w[i], 5));
    Array.from(b.dataSync()).forEach((x, i) => expect(x).toBeCloseTo(ref.b[i], 5));
  });
});

describe('AdamW memory', () => {
  it('holds two moments per variable and leaves no tensor behind once disposed', () => {
    const params = [tf.variable(tf.ones([3, 4])), tf.variable(tf.ones([5]))];
    const grads = [tf.ones([3, 4]), tf.ones([5])];
    const before = tf.memory().numTensors;
    const opt = new AdamW(params);
    expect(tf.memory().numTensors - before).toBe(2 * params.length); // the moments, not also the zeros they began as
    opt.step(grads, 0.1, 0.01);
    expect(tf.memory().numTensors - before).toBe(2 * params.length);
    opt.dispose();
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([...params, ...grads]);
  });
});

describe('clipping and schedule', () => {
  it('clips by global norm', () => {
    const norm = globalNorm([tf.tensor1d([3, 0]), tf.tensor2d([[0, 4]])]);
    expect(norm).toBeCloseTo(5, 5);
    expect(clipScale(norm, 1)).toBeCloseTo(0.2, 5);
    expect(clipScale(norm, 10)).toBe(1);
    expect(clipScale(norm, 0)).toBe(1);
  });

  it('warms up linearly and decays along a cosine to the floor', () => {
    const s = { kind: 'warmup-cosine' as const, warmupSteps: 10, totalSteps: 110, minRatio: 0.1 };
    expect(learningRateAt(1, 0, s)).toBeCloseTo(0.1);
    expect(learningRateAt(1, 9, s)).toBeCloseTo(1);
    expect(learningRateAt(1, 60, s)).toBeCloseTo(0.55);
    expect(learningRateAt(1, 110, s)).toBeCloseTo(0.1);
    expect(learningRateAt(1, 500, s)).toBeCloseTo(0.1);
    expect(learningRateAt(2, 500, { kind: 'constant' })).toBe(2);
  });
});
