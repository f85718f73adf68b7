/**
 * Our fused causal attention (attention.ts) against causalAttention on the cpu backend (its batched op or its
 * per-group loop with the hand-written gradient): the forward and dQ, dK, dV on seeded random shapes — sequences
 * that leave partial tiles, head dims 5 (rows as f32s) to 256 (the smallest tiles), grouped queries (rep 1, 2, 3, 7),
 * a long context, queries behind a trunk (queryOffset), and scores large enough that the running max must rescale.
 * Also: nothing is left allocated; a head dim over MAX_HEAD_DIM keeps the composition; the model's training step on
 * webgpu dispatches the fused kernels (and gives the cpu backend's loss and gradients), while a tree layout keeps the
 * existing path. Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend, selectBackend } from '../backend.ts';
import { causalAttention } from '../causal-attention.ts';
import type { TrainOptions, TrainSample } from '../common/engine.ts';
import { initWeights, toParams } from '../model.ts';
import { AdamW } from '../optimizer.ts';
import { buildPrefixTree } from '../prefix-tree.ts';
import { readBatchGradients } from '../testing/batch-gradients.ts';
import { tinyByteConfig } from '../testing/configs.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from '../train.ts';
import { ATTENTION_KERNEL, attentionStats, fusedCausalAttention, MAX_HEAD_DIM } from './attention.ts';
import { setMatmulKernel } from './matmul.ts';
import { kernelsRun, randomArray, runOn, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

interface Case {
  groups: number;
  t: number;
  rep: number;
  hd: number;
  queryOffset: number;
  /** Range of q's entries (pre-scaled queries): ~1/sqrt(hd) is the model's, larger makes peaked softmaxes. */
  qScale: number;
}

const CASES: Case[] = [
  { groups: 1, t: 7, rep: 1, hd: 8, queryOffset: 0, qScale: 0.5 },
  { groups: 3, t: 65, rep: 2, hd: 16, queryOffset: 0, qScale: 0.3 },
  { groups: 2, t: 33, rep: 7, hd: 64, queryOffset: 0, qScale: 0.15 },
  { groups: 2, t: 100, rep: 3, hd: 16, queryOffset: 37, qScale: 0.3 }, // behind a 37-key trunk
  { groups: 1, t: 20, rep: 7, hd: 8, queryOffset: 19, qScale: 0.5 }, // one query position, 20 keys
  { groups: 2, t: 70, rep: 1, hd: 5, queryOffset: 0, qScale: 0.5 }, // odd head dim
  { groups: 1, t: 50, rep: 2, hd: 128, queryOffset: 0, qScale: 0.1 },
  { groups: 1, t: 21, rep: 1, hd: MAX_HEAD_DIM, queryOffset: 3, qScale: 0.07 }, // the smallest tiles
  { groups: 2, t: 40, rep: 2, hd: 16, queryOffset: 0, qScale: 4 }, // scores up to ~±60: the running max rescales
  { groups: 1, t: 301, rep: 2, hd: 64, queryOffset: 0, qScale: 0.15 }, // long context: many key and row tiles
];

const caseName = (c: Case) => `G ${c.groups} T ${c.t} rep ${c.rep} hd ${c.hd} offset ${c.queryOffset} q ±${c.qScale}`;

/** q, k, v and a cotangent for y, seeded by the case's index. */
function inputsOf(c: Case, seed: number): { data: Float32Array; shape: number[] }[] {
  const qShape = [c.groups, (c.t - c.queryOffset) * c.rep, c.hd];
  const kShape = [c.groups, c.t, c.hd];
  const n = (s: number[]) => s.reduce((a, d) => a * d, 1);
  return [
    { data: randomArray(n(qShape), seed, c.qScale), shape: qShape },
    { data: randomArray(n(kShape), seed + 1), shape: kShape },
    { data: randomArray(n(kShape), seed + 2), shape: kShape },
    { data: randomArray(n(qShape), seed + 3), shape: qShape },
  ];
}

/** causalAttention and its gradients for q, k, v under the cotangent r: [y, dq, dk, dv]. */
const withGrads = (c: Case) => (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, r: tf.Tensor) => {
  const attend = (a: tf.Tensor, b: tf.Tensor, d: tf.Tensor) => causalAttention(a as tf.Tensor3D, b as tf.Tensor3D, d as tf.Tensor3D, undefined, null, c.queryOffset);
  const grads = tf.grads((a: tf.Tensor, b: tf.Tensor, d: tf.Tensor) => tf.sum(tf.mul(attend(a, b, d), r)))([q, k, v]);
  return [attend(q, k, v), ...grads];
};

/** f32 sums in another order than the cpu's: y is an average of values in [−1, 1]. */
const FORWARD_TOL = { atol: 2e-6, rtol: 1e-5 };
/**
 * Gradients sum over up to T·rep rows with cancellation, so their error scales with the largest entry (as the matmul
 * gradient's check does): this fraction of it.
 */
const GRAD_FRACTION = 1e-5;

const maxAbs = (x: Float32Array) => x.reduce((a, b) => Math.max(a, Math.abs(b)), 0);

describe.skipIf(skipReason !== null)(`our fused webgpu attention vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the engine test covers that)
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
  });

  for (const [i, c] of CASES.entries()) {
    it(`gives the forward and dQ, dK, dV of causalAttention on the cpu backend, through the fused kernels: ${caseName(c)}`, async () => {
      const inputs = inputsOf(c, 10 * i + 1);
      const want = await runOn('cpu', inputs, withGrads(c));
      const before = { ...attentionStats };
      const got = await runOn('webgpu', inputs, withGrads(c));
      // One forward for y and one for the gradient's tape; one backward.
      expect([attentionStats.forward - before.forward, attentionStats.backward - before.backward], caseName(c)).toEqual([2, 1]);
      expect(worstRatio(got[0], want[0], FORWARD_TOL.atol, FORWARD_TOL.rtol), `${caseName(c)} y`).toBeLessThanOrEqual(1);
      for (const [j, name] of ['dq', 'dk', 'dv'].entries()) {
        expect(worstRatio(got[j + 1], want[j + 1], GRAD_FRACTION * maxAbs(want[j + 1]), 0), `${caseName(c)} ${name}`).toBeLessThanOrEqual(1);
      }
    });
  }

  it('leaves no tensor behind, forward and backward (the backward frees its D)', async () => {
    const c = CASES[2];
    await runOn('webgpu', inputsOf(c, 9), withGrads(c)); // compiles the pipelines first
    const backend = tf.backend() as unknown as { numDataIds(): number };
    const before = backend.numDataIds();
    await runOn('webgpu', inputsOf(c, 9), withGrads(c));
    expect(backend.numDataIds()).toBe(before);
  });

  it('runs as one kernel forward', async () => {
    const c = CASES[1];
    const inputs = inputsOf(c, 5).slice(0, 3);
    expect(await kernelsRun(inputs, (q, k, v) => causalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D))).toEqual([ATTENTION_KERNEL]);
  });

  it('differs from attention without the causal mask (the comparison can fail)', async () => {
    const c = CASES[3];
    const inputs = inputsOf(c, 7).slice(0, 3);
    const unmasked = (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) => tf.matMul(tf.softmax(tf.matMul(q, k, false, true)), v);
    const [want] = await runOn('cpu', inputs, unmasked);
    const [got] = await runOn('webgpu', inputs, (q, k, v) => fusedCausalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, c.queryOffset));
    expect(worstRatio(got, want, FORWARD_TOL.atol, FORWARD_TOL.rtol)).toBeGreaterThan(1);
  });

  it('a head dim over the limit keeps the composition', async () => {
    const c: Case = { groups: 1, t: 9, rep: 2, hd: MAX_HEAD_DIM + 2, queryOffset: 0, qScale: 0.05 };
    const inputs = inputsOf(c, 3).slice(0, 3);
    const attend = (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) => causalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D);
    const [want] = await runOn('cpu', inputs, attend);
    const before = { ...attentionStats };
    const [got] = await runOn('webgpu', inputs, attend);
    expect(attentionStats).toEqual(before);
    expect(worstRatio(got, want, FORWARD_TOL.atol, FORWARD_TOL.rtol)).toBeLessThanOrEqual(1);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// The model's training step

const cfg = tinyByteConfig({ max_position_embeddings: 128 });
const text = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 37 + seed * 101) % 250));

function samples(): TrainSample[] {
  const make = (tokens: number[], advantage: number): TrainSample => {
    const lossMask = tokens.map((_, i) => (i >= 20 ? 1 : 0));
    return { tokens, lossMask, advantages: lossMask.map((m) => m * advantage), oldLogprobs: lossMask.map((m, i) => (m ? -5.5 + (i % 5) * 0.1 : 0)) };
  };
  return [make([...text(20, 1), ...text(75, 2)], 1), make([...text(20, 1), ...text(30, 3)], -0.5)];
}

async function lossAndGradients(packing: 'tree' | 'rows'): Promise<{ loss: number; grads: Float32Array[] }> {
  const params = toParams(initWeights(cfg, 4), true);
  const trainable = Object.values(params) as tf.Variable[];
  try {
    const opts: TrainOptions = { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, packing };
    return await readBatchGradients(batchGradients({ cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null }, samples(), opts));
  } finally {
    tf.dispose(trainable);
  }
}

/** Select webgpu (a failed self-check fails here), and make it active again after a test ran on the cpu. */
async function onWebGpu(): Promise<void> {
  await selectBackend('webgpu', { syncReads: false });
  await tf.setBackend('webgpu');
  expect(readsSyncOnActiveBackend()).toBe(false); // the device path
}

describe.skipIf(skipReason !== null)(`the model's attention on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it("dispatches the fused kernels in a training step on rows, with the cpu backend's loss and gradients", async () => {
    setMatmulKernel('tiled-f32');
    await tf.setBackend('cpu');
    const want = await lossAndGradients('rows');
    await onWebGpu();
    const before = { ...attentionStats };
    const got = await lossAndGradients('rows');
    // One micro-batch: a forward and a backward per layer.
    expect([attentionStats.forward - before.forward, attentionStats.backward - before.backward]).toEqual([cfg.num_hidden_layers, cfg.num_hidden_layers]);
    expect(Math.abs(got.loss - want.loss) / Math.abs(want.loss)).toBeLessThan(1e-5);
    let diff = 0;
    let norm = 0;
    got.grads.forEach((g, i) => g.forEach((x, j) => ((diff += (x - want.grads[i][j]) ** 2), (norm += want.grads[i][j] ** 2))));
    expect(Math.sqrt(diff / norm)).toBeLessThan(1e-5);
  });

  it('keeps the existing path for a tree layout', async () => {
    await onWebGpu();
    expect(buildPrefixTree(samples()).ids.length).toBeLessThan(95 + 50); // the samples share a prefix: a real tree
    const before = { ...attentionStats };
    await lossAndGradients('tree');
    expect(attentionStats).toEqual(before);
  });
});
