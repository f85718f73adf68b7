/**
 * The optimizer's state crosses the engine boundary whole: a step taken after restoring the weights and the
 * optimizer state of step 1 is the step the original engine took (same moments, same step count, so the same
 * learning-rate schedule position). The second half: restoring the weights alone gives a different step, so the
 * comparison can fail. One engine runs in a worker thread, the other on this thread, so both implementations and
 * the message boundary are covered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NamedTensors, OptimizerState, TrainerEngine, TrainOptions, TrainSample } from '../common/engine.ts';
import { startEngine, type ThreadEngine } from './engine-client.ts';
import { createEngine } from './load-model.ts';

const sample = (tokens: number[], advantage: number): TrainSample => ({
  tokens,
  lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)),
  advantages: tokens.map(() => advantage),
  oldLogprobs: tokens.map(() => -5),
});
const batch1 = [sample([257, 104, 105, 258], 1), sample([257, 50, 51, 52, 258], -1)];
const batch2 = [sample([257, 104, 106, 107, 258], -1), sample([257, 60, 61, 258], 1)];
// A warmup schedule makes the step count matter as well as the moments.
const OPTIONS: Partial<TrainOptions> = { learningRate: 1e-3, weightDecay: 0.01, schedule: { kind: 'warmup-cosine', warmupSteps: 3, totalSteps: 10, minRatio: 0.1 } };

function maxDifference(a: NamedTensors, b: NamedTensors): number {
  let max = 0;
  for (const name of Object.keys(a)) a[name].data.forEach((x, i) => (max = Math.max(max, Math.abs(x - b[name].data[i]))));
  return max;
}

describe('optimizer state', () => {
  let threaded: ThreadEngine;
  let local: TrainerEngine;
  beforeAll(async () => {
    threaded = await startEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm' });
    local = await createEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm' });
  });
  afterAll(async () => {
    await threaded.close();
    await local.close();
  });

  it('restored with the weights, the next step is the step the original engine took', async () => {
    const initial = await threaded.getWeights();
    expect(await threaded.getOptimizerState()).toEqual({ step: 0, m: {}, v: {} });
    await threaded.trainStep(batch1, OPTIONS);
    const afterStep1 = await threaded.getWeights();
    const state: OptimizerState = await threaded.getOptimizerState();
    expect(state.step).toBe(1);
    expect(Object.keys(state.m).sort()).toEqual(Object.keys(afterStep1).sort());
    await threaded.trainStep(batch2, OPTIONS);
    const afterStep2 = await threaded.getWeights();

    await local.setWeights(afterStep1, 1);
    await local.setOptimizerState(state);
    expect((await local.getOptimizerState()).step).toBe(1);
    await local.trainStep(batch2, OPTIONS);
    expect(maxDifference(await local.getWeights(), afterStep2)).toBeLessThan(1e-6);

    // Weights alone: fresh moments and step 0 make another update, far outside that tolerance.
    await local.setWeights(afterStep1, 1);
    await local.setOptimizerState({ step: 0, m: {}, v: {} });
    await local.trainStep(batch2, OPTIONS);
    expect(maxDifference(await local.getWeights(), afterStep2)).toBeGreaterThan(1e-4);
    await local.setWeights(initial, 0);
  });

  it('refuses a state that does not fit the trainable variables, by name, and changes nothing', async () => {
    await threaded.trainStep(batch1, OPTIONS);
    const state = await threaded.getOptimizerState();
    const name = Object.keys(state.m)[0];
    const missing: OptimizerState = { ...state, m: { ...state.m } };
    delete missing.m[name];
    await expect(threaded.setOptimizerState(missing)).rejects.toMatchObject({ name: 'OptimizerStateError' });
    const misshapen: OptimizerState = { ...state, v: { ...state.v, [name]: { shape: [1], data: new Float32Array(1) } } };
    await expect(local.setOptimizerState(misshapen)).rejects.toMatchObject({ name: 'OptimizerStateError' });
    await expect(threaded.setOptimizerState({ ...state, step: -1 })).rejects.toMatchObject({ name: 'OptimizerStateError' });
    expect(await threaded.getOptimizerState()).toEqual(state);
  });

  it('covers LoRA adapters the same way (the adapters are what the optimizer trains)', async () => {
    const lora = { rank: 4, alpha: 8, targetModules: ['q_proj', 'v_proj'] };
    const first = await createEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm', lora, seed: 3 });
    const second = await createEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm', lora, seed: 4 });
    try {
      await first.trainStep(batch1, OPTIONS);
      const adapters = await first.getWeights();
      const state = await first.getOptimizerState();
      expect(Object.keys(state.m).every((name) => /\.lora_[AB]$/.test(name))).toBe(true);
      await first.trainStep(batch2, OPTIONS);
      await second.setWeights(adapters, 1);
      await second.setOptimizerState(state);
      await second.trainStep(batch2, OPTIONS);
      expect(maxDifference(await second.getWeights(), await first.getWeights())).toBeLessThan(1e-6);
      // Full fine-tuning state does not fit a LoRA engine.
      await threaded.trainStep(batch1, OPTIONS);
      await expect(second.setOptimizerState(await threaded.getOptimizerState())).rejects.toMatchObject({ name: 'OptimizerStateError' });
    } finally {
      await first.close();
      await second.close();
    }
  });
});
