/**
 * Mixed-precision training on WebGPU (worker/precision.ts, webgpu/matmul.ts withF16Matmuls, loss-scale.ts) against
 * f32 on the same device and on the cpu backend. Runs where a WebGPU adapter with shader-f16 exists (lavapipe has
 * it); skipped only without an adapter. The loss scaler's rules, the exactness of scaling the gradient (cpu backend)
 * and the fallback off webgpu need no GPU.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import type { BackendReport, NamedTensors, TrainMetrics, TrainSample } from './common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from './engine.ts';
import { InvalidLossScaleError, LOSS_SCALE_GROWTH_INTERVAL, LossScaler, MAX_LOSS_SCALE, MIN_LOSS_SCALE } from './loss-scale.ts';
import { initWeights, toParams } from './model.ts';
import { AdamW } from './optimizer.ts';
import { choosePrecision, MIXED_SELF_CHECK_TOLERANCE, mixedPrecisionSelfCheck, UnknownPrecisionError } from './precision.ts';
import { readBatchGradients } from './testing/batch-gradients.ts';
import { tinyByteConfig } from './testing/configs.ts';
import { TRUNK_BUDGET, trunkSamples } from './testing/tree-samples.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from './train.ts';
import { webgpuFeatures } from './webgpu/device.ts';
import { matmulStats } from './webgpu/matmul.ts';
import { webgpuSkipReason } from './webgpu/testing/gpu.ts';

const skipReason = await webgpuSkipReason();

describe('the loss scaler', () => {
  it('halves on an overflow, doubles after LOSS_SCALE_GROWTH_INTERVAL good steps, and stays in range', () => {
    const s = new LossScaler(4);
    expect(s.update(false)).toEqual({ scale: 4, skipped: true });
    expect(s.scale).toBe(2);
    for (let i = 0; i < LOSS_SCALE_GROWTH_INTERVAL - 1; i++) expect(s.update(true)).toEqual({ scale: 2, skipped: false });
    expect(s.scale).toBe(2);
    s.update(true);
    expect(s.scale).toBe(4);
    const low = new LossScaler(MIN_LOSS_SCALE);
    low.update(false);
    expect(low.scale).toBe(MIN_LOSS_SCALE);
    expect(low.skippedSteps).toBe(1);
    const high = new LossScaler(MAX_LOSS_SCALE);
    for (let i = 0; i < LOSS_SCALE_GROWTH_INTERVAL; i++) high.update(true);
    expect(high.scale).toBe(MAX_LOSS_SCALE);
  });

  it('refuses a scale that is not a power of two in range', () => {
    for (const bad of [3, 0, 0.5, 2 * MAX_LOSS_SCALE, Number.NaN]) expect(() => new LossScaler(bad)).toThrowError(expect.objectContaining({ name: InvalidLossScaleError.name }));
  });
});

describe('loss scaling in the gradient', () => {
  it('gives the unscaled gradients exactly (a power of two), through a trunk and the PPO loss, on the cpu backend', async () => {
    await tf.setBackend('cpu');
    const cfg = tinyByteConfig({ max_position_embeddings: 128 }); // the trunk samples are 100 tokens long
    const params = toParams(initWeights(cfg, 2), true);
    const trainable = Object.values(params) as tf.Variable[];
    const optimizer = new AdamW(trainable);
    const state = { cfg, params, lora: null, trainable, optimizer, reference: null };
    const opts = { ...DEFAULT_TRAIN_OPTIONS, microBatchTokens: TRUNK_BUDGET };
    try {
      const plain = await readBatchGradients(batchGradients(state, trunkSamples(), opts));
      const scaled = await readBatchGradients(batchGradients(state, trunkSamples(), opts, 2 ** 12));
      expect(plain.microBatches).toBeGreaterThan(1); // the samples do not fit one micro-batch: a trunk ran
      expect(scaled.loss).toBe(plain.loss);
      expect(scaled.entropy).toBe(plain.entropy);
      // Every backward op is linear in the incoming gradient, and scaling by 2¹² is exact in f32 (no value here
      // is near f32's range ends), so the unscaled sums are the same floats.
      scaled.grads.forEach((g, i) => expect(g).toEqual(plain.grads[i]));
    } finally {
      optimizer.dispose();
      tf.dispose(trainable);
    }
  });
});

describe('the precision choice without a GPU', () => {
  const wasm: BackendReport = { name: 'wasm', reason: 'test', passedOver: [], selfCheck: { ok: true, maxAbsError: 0 } };

  it('trains in f32 when asked, and falls back to f32 off webgpu with the reason', async () => {
    expect(await choosePrecision('f32', wasm)).toMatchObject({ requested: 'f32', active: 'f32' });
    const mixed = await choosePrecision('mixed', wasm);
    expect(mixed).toMatchObject({ requested: 'mixed', active: 'f32' });
    expect(mixed.reason).toContain('wasm');
    await expect(choosePrecision('f16' as never, wasm)).rejects.toMatchObject({ name: UnknownPrecisionError.name });
  });
});

/** A PPO-free SFT sample over the tiny byte model: 24 tokens, every one after the first trained. */
function sample(offset: number): TrainSample {
  const tokens = Array.from({ length: 24 }, (_, i) => (i * 11 + offset) % 200);
  return { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) };
}

const CFG = tinyByteConfig();
const WEIGHTS = initWeights(CFG, 3);
const SFT = { loss: 'sft' as const, learningRate: 1e-2, maxGradNorm: 0 };

async function engineWith(precision: 'f32' | 'mixed', initialLossScale?: number): Promise<LocalEngine> {
  return createEngineFromWeights({ name: 'precision-test', config: CFG, weights: WEIGHTS, tokenizer: null, backend: 'webgpu', seed: 1, precision, initialLossScale });
}

/** Largest |a − b| over every element of every tensor, and the largest |b|. */
function maxDifference(a: NamedTensors, b: NamedTensors): { diff: number; scale: number } {
  let diff = 0;
  let scale = 0;
  for (const [name, t] of Object.entries(a)) {
    for (let i = 0; i < t.data.length; i++) {
      diff = Math.max(diff, Math.abs(t.data[i] - b[name].data[i]));
      scale = Math.max(scale, Math.abs(b[name].data[i]));
    }
  }
  return { diff, scale };
}

describe.skipIf(skipReason !== null)(`mixed precision on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('passes its self-check against the cpu backend, with f16-sized (not zero) errors', async () => {
    await selectBackend('webgpu', { syncReads: false });
    expect(webgpuFeatures()?.shaderF16).toBe(true); // lavapipe and the GPUs we run on have it
    const before = { ...matmulStats };
    const check = await mixedPrecisionSelfCheck();
    console.log(`mixed-precision self-check: ${JSON.stringify(check)}`);
    expect(check.ok).toBe(true);
    for (const e of [check.logitsError, check.gradError]) {
      expect(e).toBeLessThanOrEqual(MIXED_SELF_CHECK_TOLERANCE);
      expect(e).toBeGreaterThan(1e-5); // f16 rounding happened: f32 on the same model agrees to ~1e-6
    }
    expect(matmulStats.mixed).toBeGreaterThan(before.mixed);
    expect(matmulStats.mixedF16Weights).toBeGreaterThan(before.mixedF16Weights); // the weights' f16 copies were read
  });

  it('trains one step to f32’s loss, gradient norm and weights within f16 tolerances', async () => {
    const f32 = await engineWith('f32');
    const mixed = await engineWith('mixed');
    try {
      expect(f32.info.precision?.active).toBe('f32');
      expect(mixed.info.precision).toMatchObject({ requested: 'mixed', active: 'mixed' });
      const batch = [sample(0), sample(5)];
      const a = await f32.trainStep(batch, SFT);
      const before = { ...matmulStats };
      const b = await mixed.trainStep(batch, SFT);
      expect(matmulStats.mixed).toBeGreaterThan(before.mixed); // the step's products ran in mixed precision
      expect(matmulStats.mixedF16Weights).toBeGreaterThan(before.mixedF16Weights);
      expect(b).toMatchObject({ precision: 'mixed', skippedStep: false, lossScale: 2 ** 15 });
      expect(a.precision).toBe('f32');
      expect(a.lossScale).toBeUndefined();
      const lossError = Math.abs(b.loss - a.loss) / a.loss;
      const normError = Math.abs(b.gradNorm - a.gradNorm) / a.gradNorm;
      // The loss is a mean of log-softmaxes of f16-rounded products (~5e-4 relative each): 1e-3 relative is a few
      // roundings' worth. The gradient norm sums squares of gradients whose every product rounded its inputs: 1e-2.
      expect(lossError).toBeLessThan(1e-3);
      expect(normError).toBeLessThan(1e-2);
      // AdamW's first step moves each weight by ±lr (m̂/√v̂ = sign g): a weight moves differently only where its
      // gradient's sign flips, a gradient too small for f16's rounding; most move alike, so the mean difference is
      // a small part of lr while the largest is 2·lr.
      const wf = await f32.getWeights();
      const wm = await mixed.getWeights();
      const { diff } = maxDifference(wm, wf);
      let sum = 0;
      let n = 0;
      for (const [name, t] of Object.entries(wm)) {
        for (let i = 0; i < t.data.length; i++) sum += Math.abs(t.data[i] - wf[name].data[i]);
        n += t.data.length;
      }
      const meanDiff = sum / n;
      console.log(`one step, mixed vs f32: loss ${a.loss} vs ${b.loss} (rel ${lossError.toExponential(2)}), grad norm ${a.gradNorm} vs ${b.gradNorm} (rel ${normError.toExponential(2)}), weights max |Δ| ${diff.toExponential(2)}, mean |Δ| ${meanDiff.toExponential(2)} (lr ${SFT.learningRate})`);
      expect(diff).toBeLessThanOrEqual(2.01 * SFT.learningRate);
      expect(meanDiff).toBeLessThan(0.05 * SFT.learningRate);
    } finally {
      await f32.close();
      await mixed.close();
    }
  });

  it('lowers the loss over a few mixed steps on a small batch, and leaves no device data once closed', async () => {
    const buffers = tf.backend().numDataIds(); // the backend's count: the f16 copies are data of no tf.Tensor
    const mixed = await engineWith('mixed');
    try {
      const batch = [sample(1), sample(9)];
      const metrics: TrainMetrics[] = [];
      for (let i = 0; i < 4; i++) metrics.push(await mixed.trainStep(batch, { ...SFT, learningRate: 3e-3 }));
      console.log(`mixed steps: losses ${metrics.map((m) => m.loss.toFixed(4)).join(', ')}`);
      expect(metrics.every((m) => !m.skippedStep)).toBe(true);
      for (let i = 1; i < metrics.length; i++) expect(metrics[i].loss).toBeLessThan(metrics[i - 1].loss);
    } finally {
      await mixed.close();
    }
    expect(tf.backend().numDataIds()).toBe(buffers); // weights, moments and the weights' f16 copies all released
  });

  it('skips a step whose scaled gradients overflow f16, halving the scale, and recovers', async () => {
    // At 2²⁴ the logits' gradient, which the head's gradient product reads, reaches 2²⁴/46 trained tokens ≈ 3.6e5,
    // past f16's 65504: an overflow by construction. Each skip halves the scale until the scaled gradients fit.
    const mixed = await engineWith('mixed', MAX_LOSS_SCALE);
    try {
      const batch = [sample(2), sample(4)];
      const first = await mixed.trainStep(batch, SFT);
      expect(first).toMatchObject({ skippedStep: true, lossScale: MAX_LOSS_SCALE });
      expect(Number.isFinite(first.gradNorm)).toBe(false);
      expect(Number.isFinite(first.loss)).toBe(true); // the loss itself is f32 and unscaled
      // Nothing changed: weights as loaded, no optimizer step counted.
      expect(maxDifference(await mixed.getWeights(), WEIGHTS).diff).toBe(0);
      expect((await mixed.getOptimizerState()).step).toBe(0);
      const scales = [first.lossScale];
      let last = first;
      while (last.skippedStep && scales.length < 24) {
        last = await mixed.trainStep(batch, SFT);
        scales.push(last.lossScale);
      }
      console.log(`loss scales until a step applied: ${scales.map((s) => `2^${Math.log2(s!)}`).join(', ')}`);
      expect(last.skippedStep).toBe(false);
      scales.forEach((s, i) => expect(s).toBe(MAX_LOSS_SCALE / 2 ** i));
      expect(Number.isFinite(last.gradNorm)).toBe(true);
      expect((await mixed.getOptimizerState()).step).toBe(1);
      expect(maxDifference(await mixed.getWeights(), WEIGHTS).diff).toBeGreaterThan(0);
      const next = await mixed.trainStep(batch, SFT);
      expect(next.skippedStep).toBe(false);
      expect(next.loss).toBeLessThan(last.loss);
    } finally {
      await mixed.close();
    }
  });
});
