/**
 * Several optimizer updates in one step (TrainOptions miniBatches and epochs, worker/train.ts): a step of k
 * mini-batches makes the updates k steps over its parts would (each part with its share of the loss divisor), an
 * epoch more passes over the same samples again, the policy version advances once, and decoupled PPO takes every
 * update's ratio against the weights the step began with.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import type { NamedTensors, TrainOptions, TrainSample } from './common/engine.ts';
import type { LocalEngine } from './engine.ts';
import { tinyByteConfig } from './testing/configs.ts';
import { wasmEngines } from './testing/wasm-engines.ts';

const cfg = tinyByteConfig();
const engine = wasmEngines('mini-batches', cfg, 6);

/** Four samples of 20 tokens, the last 12 trained, advantages of both signs. */
async function samplesOn(e: LocalEngine): Promise<TrainSample[]> {
  const all = [0, 1, 2, 3].map((k) => Array.from({ length: 20 }, (_, i) => (i * (7 + k) + 3 * k + 1) % 250));
  const logprobs = await e.logprobs(all);
  return all.map((tokens, k) => {
    const lossMask = tokens.map((_, i) => (i >= 8 ? 1 : 0));
    return { tokens, lossMask, advantages: lossMask.map((m, i) => (m ? ((i + k) % 3) - 0.9 : 0)), oldLogprobs: logprobs[k].map((lp, i) => (lossMask[i] ? lp : 0)) };
  });
}

const OPTIONS: Partial<TrainOptions> = { learningRate: 3e-2, weightDecay: 0, normalization: 'token-sum', lossDivisor: 4, maxGradNorm: 1e9 };

function maxDifference(a: NamedTensors, b: NamedTensors): number {
  let worst = 0;
  for (const [name, t] of Object.entries(a)) t.data.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - b[name].data[i]))));
  return worst;
}

describe('mini-batches and epochs in one step', () => {
  it('makes the updates of one step per mini-batch, each with its share of the divisor, and advances the version once', async () => {
    const together = await engine();
    const samples = await samplesOn(together);
    const metrics = await together.trainStep(samples, { ...OPTIONS, miniBatches: 2 });
    const apart = await engine();
    await apart.trainStep(samples.slice(0, 2), { ...OPTIONS, lossDivisor: 2 });
    await apart.trainStep(samples.slice(2), { ...OPTIONS, lossDivisor: 2 });
    expect(maxDifference(await together.getWeights(), await apart.getWeights())).toBeLessThan(1e-6);
    expect(metrics.updates).toBe(2);
    expect(metrics.policyVersion).toBe(1);
    // And the updates did move the weights (the comparison is not between two untouched copies).
    const untouched = await engine();
    expect(maxDifference(await together.getWeights(), await untouched.getWeights())).toBeGreaterThan(1e-3);
  });

  it('passes over the samples once per epoch', async () => {
    const twice = await engine();
    const samples = await samplesOn(twice);
    const metrics = await twice.trainStep(samples, { ...OPTIONS, epochs: 2 });
    const apart = await engine();
    for (let epoch = 0; epoch < 2; epoch++) await apart.trainStep(samples, OPTIONS);
    expect(maxDifference(await twice.getWeights(), await apart.getWeights())).toBeLessThan(1e-6);
    expect(metrics.updates).toBe(2);
  });

  it('clips decoupled PPO against the weights the step began with, not those of the update before', async () => {
    const decoupled = { ...OPTIONS, loss: 'decoupled-ppo' as const, learningRate: 1e-1, clipLow: 0.05, clipHigh: 0.05 };
    const oneStep = await engine();
    const samples = await samplesOn(oneStep);
    const together = await oneStep.trainStep(samples, { ...decoupled, miniBatches: 2 });
    // As two steps, the second's proximal policy is the weights after the first: ratios start at 1, nothing clips.
    const twoSteps = await engine();
    await twoSteps.trainStep(samples.slice(0, 2), { ...decoupled, lossDivisor: 2 });
    const second = await twoSteps.trainStep(samples.slice(2), { ...decoupled, lossDivisor: 2 });
    expect(second.clipFraction).toBe(0);
    // In one step the second update's tokens are clipped against where the first began, which has moved.
    expect(together.clipFraction).toBeGreaterThan(0);
    expect(together.policyVersion).toBe(1);
  });

  it('holds only the adapters with LoRA, and leaves no tensor behind, while clipping against the step\'s start', async () => {
    const lora = { rank: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'up_proj'] };
    const decoupled = { ...OPTIONS, loss: 'decoupled-ppo' as const, learningRate: 3e-1, clipLow: 0.05, clipHigh: 0.05 };
    const oneStep = await engine({ lora });
    const samples = await samplesOn(oneStep);
    await oneStep.trainStep(samples, { ...decoupled, learningRate: 0 }); // warm: the optimizer's moments exist from here on
    const before = tf.memory().numTensors;
    const together = await oneStep.trainStep(samples, { ...decoupled, miniBatches: 2 });
    expect(tf.memory().numTensors).toBe(before);
    const twoSteps = await engine({ lora });
    await twoSteps.trainStep(samples, { ...decoupled, learningRate: 0 });
    await twoSteps.trainStep(samples.slice(0, 2), { ...decoupled, lossDivisor: 2 });
    const second = await twoSteps.trainStep(samples.slice(2), { ...decoupled, lossDivisor: 2 });
    expect(second.clipFraction).toBe(0);
    expect(together.clipFraction).toBeGreaterThan(0);
  });

  it('refuses more updates than a step may make, by name', async () => {
    const e = await engine();
    const samples = await samplesOn(e);
    await expect(e.trainStep(samples, { ...OPTIONS, miniBatches: 16, epochs: 8 })).rejects.toMatchObject({ name: 'InvalidTrainOptionsError' });
    await expect(e.trainStep(samples, { ...OPTIONS, epochs: 0 })).rejects.toMatchObject({ name: 'InvalidTrainOptionsError' });
    // Nothing was applied: the next step is the first.
    const next = await e.trainStep(samples, { ...OPTIONS, miniBatches: 9 });
    expect(next.policyVersion).toBe(1);
    // More mini-batches than samples: one a sample.
    expect(next.updates).toBe(4);
  });
});
