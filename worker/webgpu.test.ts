/**
 * The engine on WebGPU (Dawn), which reads results asynchronously under Node, against the same engine on wasm: same
 * greedy and seeded tokens, same logprobs and training metrics within float tolerance. Runs where a WebGPU adapter
 * exists (a GPU, or Mesa's lavapipe, which .ci/run installs); skipped, with the reason, only where none does. Our
 * kernels (worker/webgpu/) are active: BatchMatMul is ours.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend, selectBackend } from './backend.ts';
import type { BackendName, GenerateResult, NamedTensors, TrainMetrics } from './common/engine.ts';
import { createEngineFromWeights } from './engine.ts';
import { initWeights } from './model.ts';
import { sampling, tinyByteConfig } from './testing/configs.ts';
import { matmulStats, setMatmulKernel } from './webgpu/matmul.ts';
import { webgpuSkipReason } from './webgpu/testing/gpu.ts';

// Skips only without an adapter (worker/webgpu/testing/gpu.ts); a failed self-check fails the first test.
const skipReason = await webgpuSkipReason();

interface Run {
  greedy: GenerateResult;
  batched: GenerateResult[];
  seeded: GenerateResult;
  scored: number[][];
  metrics: TrainMetrics[];
  afterTraining: GenerateResult;
  weights: NamedTensors;
  readsSync: boolean;
}

/** Generation (one alone, three batched, one seeded), scoring and two PPO steps on a fresh tiny engine. */
async function runEngine(backend: BackendName): Promise<Run> {
  const cfg = tinyByteConfig();
  const engine = await createEngineFromWeights({ name: 'webgpu-test', config: cfg, weights: initWeights(cfg, 3), tokenizer: null, backend, seed: 1 });
  try {
    const prompts = [
      [5, 9, 40, 77, 3],
      [100, 2, 3],
      [7, 7, 8, 9, 10, 11, 12, 13],
    ];
    const greedy = await engine.generate({ promptIds: prompts[0], sampling: sampling({ maxTokens: 8 }) });
    const batched = await Promise.all(prompts.map((promptIds) => engine.generate({ promptIds, sampling: sampling({ maxTokens: 8 }) })));
    const seeded = await engine.generate({ promptIds: prompts[1], sampling: sampling({ maxTokens: 8, temperature: 1, seed: 5 }) });
    const scored = await engine.logprobs([[...prompts[0], ...greedy.tokens.map((t) => t.id)]]);
    const tokens = Array.from({ length: 20 }, (_, i) => (i * 7) % 200);
    const sample = { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map((_, i) => (i % 3) - 1), oldLogprobs: tokens.map(() => -5.5) };
    const metrics = [await engine.trainStep([sample], { loss: 'ppo', learningRate: 1e-2 }), await engine.trainStep([sample], { loss: 'ppo', learningRate: 1e-2 })];
    const afterTraining = await engine.generate({ promptIds: prompts[0], sampling: sampling({ maxTokens: 8 }) });
    return { greedy, batched, seeded, scored, metrics, afterTraining, weights: await engine.getWeights(), readsSync: readsSyncOnActiveBackend() };
  } finally {
    await engine.close();
  }
}

const ids = (r: GenerateResult) => r.tokens.map((t) => t.id);

/** Mean |a − b| over every element of every tensor. */
function meanAbsDifference(a: NamedTensors, b: NamedTensors): number {
  let sum = 0;
  let n = 0;
  for (const [name, t] of Object.entries(a)) {
    for (let i = 0; i < t.data.length; i++) sum += Math.abs(t.data[i] - b[name].data[i]);
    n += t.data.length;
  }
  return sum / n;
}

describe.skipIf(skipReason !== null)(`the engine on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('selects webgpu for a caller that reads asynchronously, passing the numerics self-check', async () => {
    // A self-check failure rejects here (BackendUnavailableError naming it): a failure, not a skip.
    const report = await selectBackend('webgpu', { syncReads: false });
    expect(report.name).toBe('webgpu');
    expect(report.selfCheck.ok).toBe(true);
    expect(report.selfCheck.maxAbsError).toBeLessThan(1e-3);
    expect((tf.getKernel(tf.BatchMatMul, 'webgpu')?.kernelFunc as { ours?: boolean } | undefined)?.ours).toBe(true);
    expect(report.kernels).toMatch(/^matmul skinny .*; tiled /); // ours vs tfjs's, measured on this device
  });

  it('generates the same tokens and trains to the same metrics as on wasm, reading asynchronously', async () => {
    const wasm = await runEngine('wasm');
    setMatmulKernel('tiled-f32'); // ours everywhere, whatever the calibration measured faster on this device
    const ours = matmulStats.tiled + matmulStats.skinny;
    const gpu = await runEngine('webgpu');
    expect(tf.getBackend()).toBe('webgpu');
    expect(matmulStats.tiled + matmulStats.skinny).toBeGreaterThan(ours); // our matmul ran the model
    expect(gpu.readsSync).toBe(false); // the async paths ran (device KV cache, on-device clipping)
    expect(ids(gpu.greedy)).toEqual(ids(wasm.greedy));
    expect(gpu.batched.map(ids)).toEqual(wasm.batched.map(ids));
    expect(gpu.batched[0].tokens.map((t) => t.id)).toEqual(ids(gpu.greedy)); // batching changes nothing
    expect(ids(gpu.seeded)).toEqual(ids(wasm.seeded));
    gpu.greedy.tokens.forEach((t, i) => expect(t.logprob).toBeCloseTo(wasm.greedy.tokens[i].logprob, 3));
    gpu.scored[0].forEach((lp, i) => expect(lp).toBeCloseTo(wasm.scored[0][i], 3));
    gpu.metrics.forEach((m, i) => {
      expect(m.loss).toBeCloseTo(wasm.metrics[i].loss, 3);
      expect(m.gradNorm).toBeCloseTo(wasm.metrics[i].gradNorm, 2);
      expect(m.entropy).toBeCloseTo(wasm.metrics[i].entropy, 3);
      expect(m.clipFraction).toBe(wasm.metrics[i].clipFraction);
    });
    expect(gpu.metrics[1].loss).not.toBeCloseTo(gpu.metrics[0].loss, 3); // the first step changed the weights
    expect(ids(gpu.afterTraining)).toEqual(ids(wasm.afterTraining));
    // The trained weights read back (getWeights) moved from the init, and both backends moved them alike.
    const moved = meanAbsDifference(gpu.weights, initWeights(tinyByteConfig(), 3));
    expect(moved).toBeGreaterThan(1e-3);
    expect(meanAbsDifference(gpu.weights, wasm.weights)).toBeLessThan(0.1 * moved);
  });
});
