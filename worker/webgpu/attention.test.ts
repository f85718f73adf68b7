/**
 * Our fused attention (attention.ts) against causalAttention on the cpu backend (its batched op or its per-group loop
 * with the hand-written gradient): the forward and dQ, dK, dV on testing/checks.ts's seeded cases, the device
 * script's too — causal ones (partial tiles, head dims 5 to 256, rep 1 to 7, a long context, queryOffset, peaked
 * softmaxes) and tree layouts (random branching trees, deep nesting, a forest, a GRPO group, a chain that must give
 * plain causal attention, a tree behind a trunk). Also: nothing is left allocated; a head dim over MAX_HEAD_DIM keeps
 * the composition; a layout not in depth-first order is refused by name; the comparison can fail (causal against
 * unmasked, a tree against causal); the model's training step on webgpu dispatches the fused kernels, on rows, on a
 * tree and behind a trunk, and gives the cpu backend's loss and gradients. Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend, selectBackend } from '../backend.ts';
import { causalAttention } from '../causal-attention.ts';
import type { TrainOptions, TrainSample } from '../common/engine.ts';
import { initWeights, toParams } from '../model.ts';
import { AdamW } from '../optimizer.ts';
import { buildPrefixTree, planTreeRuns, type TreeLayout } from '../prefix-tree.ts';
import { readBatchGradients } from '../testing/batch-gradients.ts';
import { tinyByteConfig } from '../testing/configs.ts';
import { text, TRUNK_BUDGET, trunkSamples } from '../testing/tree-samples.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from '../train.ts';
import { ATTENTION_KERNEL, attentionStats, fusedCausalAttention, MAX_HEAD_DIM, subtreeEnds, TreeLayoutError } from './attention.ts';
import { setMatmulKernel } from './matmul.ts';
import { ATTENTION_CASES, ATTENTION_FORWARD_TOL, type AttentionCase, attentionCaseChecks, attentionCaseName, attentionInputs, attentionSeed, attentionWithGrads, treeOf } from './testing/checks.ts';
import { kernelsRun, runOn, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

const caseAt = (name: string) => ATTENTION_CASES.findIndex((c) => attentionCaseName(c).includes(name));
const byName = (name: string) => ATTENTION_CASES[caseAt(name)];
const FORWARD_TOL = ATTENTION_FORWARD_TOL;

describe.skipIf(skipReason !== null)(`our fused webgpu attention vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the engine test covers that)
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
  });

  for (const [i, c] of ATTENTION_CASES.entries()) {
    it(`gives the forward and dQ, dK, dV of causalAttention on the cpu backend, through the fused kernels: ${attentionCaseName(c)}`, async () => {
      for (const check of await attentionCaseChecks(c, attentionSeed(i))) expect(check.ratio, check.name).toBeLessThanOrEqual(1);
    });
  }

  for (const name of ['causal: G 2 T 33 rep 7', 'tree, a GRPO group']) {
    it(`leaves no tensor behind, forward and backward (the backward frees its stats, the tree input goes with the tape): ${name}`, async () => {
      const c = byName(name);
      await runOn('webgpu', attentionInputs(c, 9), attentionWithGrads(c)); // compiles the pipelines first
      const backend = tf.backend() as unknown as { numDataIds(): number };
      const before = backend.numDataIds();
      await runOn('webgpu', attentionInputs(c, 9), attentionWithGrads(c));
      await runOn('webgpu', attentionInputs(c, 9).slice(0, 3), (q, k, v) => causalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, undefined, c.layout)); // no tape
      expect(backend.numDataIds()).toBe(before);
    });
  }

  for (const name of ['causal: G 3 T 65', 'tree: G 3 T 102']) {
    it(`runs as one kernel forward: ${name}`, async () => {
      const c = byName(name);
      const inputs = attentionInputs(c, 5).slice(0, 3);
      // The tree input is uploaded, not computed: no kernel.
      expect(await kernelsRun(inputs, (q, k, v) => causalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, undefined, c.layout))).toEqual([ATTENTION_KERNEL]);
    });
  }

  it('differs from attention without the causal mask, and a tree from causal attention (the comparison can fail)', async () => {
    const c = byName('causal behind a 37-key trunk');
    const inputs = attentionInputs(c, 7).slice(0, 3);
    const unmasked = (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) => tf.matMul(tf.softmax(tf.matMul(q, k, false, true)), v);
    const [want] = await runOn('cpu', inputs, unmasked);
    const [got] = await runOn('webgpu', inputs, (q, k, v) => fusedCausalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, c.queryOffset));
    expect(worstRatio(got, want, FORWARD_TOL.atol, FORWARD_TOL.rtol)).toBeGreaterThan(1);
    const t = byName('tree behind a 37-key trunk');
    const treeInputs = attentionInputs(t, 7).slice(0, 3);
    const [causal] = await runOn('cpu', treeInputs, (q, k, v) => causalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, undefined, null, t.queryOffset));
    const [tree] = await runOn('webgpu', treeInputs, (q, k, v) => fusedCausalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, t.queryOffset, t.layout));
    expect(worstRatio(tree, causal, FORWARD_TOL.atol, FORWARD_TOL.rtol)).toBeGreaterThan(1);
  });

  it('refuses a layout not in depth-first order by name, before any kernel runs', async () => {
    // Node 2's parent is 0, but node 1 (a root) sits between them: 0's subtree is not a range.
    const layout: TreeLayout = { parent: Int32Array.from([-1, -1, 0]), chainStart: Int32Array.from([0, 1, 2]), depth: Int32Array.from([0, 0, 1]) };
    expect(() => subtreeEnds(layout)).toThrow(TreeLayoutError);
    const c: AttentionCase = { ...byName('causal: G 1 T 7'), t: 3 };
    const before = { ...attentionStats };
    await expect(runOn('webgpu', attentionInputs(c, 1).slice(0, 3), (q, k, v) => causalAttention(q as tf.Tensor3D, k as tf.Tensor3D, v as tf.Tensor3D, undefined, layout))).rejects.toThrow(TreeLayoutError);
    expect(attentionStats).toEqual(before);
    // A depth-first layout's ends: every subtree is the range [j, endⱼ).
    expect(Array.from(subtreeEnds(treeOf([[1, 2, 3], [1, 4], [5]])))).toEqual([4, 3, 3, 4, 5]);
  });

  it('a head dim over the limit keeps the composition', async () => {
    const c: AttentionCase = { ...byName('causal: G 1 T 7'), t: 9, rep: 2, hd: MAX_HEAD_DIM + 2, qScale: 0.05 };
    const inputs = attentionInputs(c, 3).slice(0, 3);
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

function samples(): TrainSample[] {
  const make = (tokens: number[], advantage: number): TrainSample => {
    const lossMask = tokens.map((_, i) => (i >= 20 ? 1 : 0));
    return { tokens, lossMask, advantages: lossMask.map((m) => m * advantage), oldLogprobs: lossMask.map((m, i) => (m ? -5.5 + (i % 5) * 0.1 : 0)) };
  };
  return [make([...text(20, 1), ...text(75, 2)], 1), make([...text(20, 1), ...text(30, 3)], -0.5)];
}


async function lossAndGradients(packing: 'tree' | 'rows', batch = samples(), microBatchTokens = DEFAULT_TRAIN_OPTIONS.microBatchTokens): Promise<{ loss: number; grads: Float32Array[] }> {
  const params = toParams(initWeights(cfg, 4), true);
  const trainable = Object.values(params) as tf.Variable[];
  try {
    const opts: TrainOptions = { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, packing, microBatchTokens };
    return await readBatchGradients(batchGradients({ cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null }, batch, opts));
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

/** The loss and gradients on the cpu and on webgpu, and the fused dispatches (forward, backward, tree's) on webgpu. */
async function cpuAndWebGpu(run: () => Promise<{ loss: number; grads: Float32Array[] }>): Promise<number[]> {
  setMatmulKernel('tiled-f32');
  await tf.setBackend('cpu');
  const want = await run();
  await onWebGpu();
  const before = { ...attentionStats };
  const got = await run();
  expect(Math.abs(got.loss - want.loss) / Math.abs(want.loss)).toBeLessThan(1e-5);
  let diff = 0;
  let norm = 0;
  got.grads.forEach((g, i) => g.forEach((x, j) => ((diff += (x - want.grads[i][j]) ** 2), (norm += want.grads[i][j] ** 2))));
  expect(Math.sqrt(diff / norm)).toBeLessThan(1e-5);
  return (['forward', 'backward', 'treeForward', 'treeBackward'] as const).map((k) => attentionStats[k] - before[k]);
}

describe.skipIf(skipReason !== null)(`the model's attention on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const layers = cfg.num_hidden_layers;

  it("dispatches the fused kernels in a training step on rows, with the cpu backend's loss and gradients", async () => {
    // One micro-batch: a forward and a backward per layer.
    expect(await cpuAndWebGpu(() => lossAndGradients('rows'))).toEqual([layers, layers, 0, 0]);
  });

  it("dispatches the fused tree kernels in a training step packed as a tree (the default), with the cpu backend's loss and gradients", async () => {
    expect(DEFAULT_TRAIN_OPTIONS.packing).toBe('tree');
    expect(buildPrefixTree(samples()).ids.length).toBeLessThan(95 + 50); // the samples share a prefix: a real tree
    expect(await cpuAndWebGpu(() => lossAndGradients('tree'))).toEqual([layers, layers, layers, layers]);
  });

  it("dispatches the fused tree kernels behind a trunk (queryOffset with a layout), with the cpu backend's loss and gradients", async () => {
    const batch = trunkSamples();
    expect(planTreeRuns(batch, TRUNK_BUDGET).map((r) => [r.trunkLength, r.microBatches.length])).toEqual([[69, 2]]);
    const ran = await cpuAndWebGpu(() => lossAndGradients('tree', batch, TRUNK_BUDGET));
    // The micro-batch of three samples attends by its tree behind the trunk's keys: a forward and a backward per
    // layer. The other holds one sample, a chain: with the trunk, plain causal attention (fused too, as the trunk's).
    expect(planTreeRuns(batch, TRUNK_BUDGET)[0].microBatches.map((m) => m.length)).toEqual([3, 1]);
    expect(ran.slice(2)).toEqual([layers, layers]);
    expect(ran[1]).toBeGreaterThan(layers);
  });
});
