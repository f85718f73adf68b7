/**
 * The model's forward on WebGPU takes our RMSNorm, RoPE and SwiGLU kernels (worker/model.ts), in training too: a
 * training step of the tiny model (Qwen3-style: q/k norms) dispatches them (tf.profile's kernel names, counted per
 * layer), in fewer kernels than the tf compositions on webgpu, and gives the cpu backend's loss and gradients. Both
 * packings: a prefix tree (one packed row) and padded rows (a batch dimension for RoPE). Skips only where no adapter
 * exists (testing/gpu.ts).
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import type { TrainOptions, TrainSample } from '../common/engine.ts';
import { initWeights, toParams } from '../model.ts';
import { AdamW } from '../optimizer.ts';
import { readBatchGradients } from '../testing/batch-gradients.ts';
import { tinyByteConfig } from '../testing/configs.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from '../train.ts';
import { setFusedKernels } from './fused-matmul.ts';
import { registerRmsNorm, RMS_NORM_KERNEL } from './rms-norm.ts';
import { registerRope, ROPE_KERNEL } from './rope.ts';
import { registerSwiglu, SWIGLU_KERNEL } from './swiglu.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();
const cfg = tinyByteConfig();
const layers = cfg.num_hidden_layers;
const text = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 37 + seed * 101) % 250));

/** A shared prompt and three answers (one branching inside another), all trained: one micro-batch. */
function samples(): TrainSample[] {
  const prompt = text(12, 1);
  const make = (generated: number[], advantage: number): TrainSample => {
    const tokens = [...prompt, ...generated];
    const lossMask = tokens.map((_, i) => (i >= prompt.length ? 1 : 0));
    return { tokens, lossMask, advantages: lossMask.map((m) => m * advantage), oldLogprobs: lossMask.map((m, i) => (m ? -5.5 + (i % 5) * 0.1 : 0)) };
  };
  return [make(text(9, 2), 1), make([...text(9, 2).slice(0, 3), ...text(6, 3)], -0.6), make(text(7, 4), 0.4)];
}

interface Step {
  loss: number;
  grads: Float32Array[];
  /** tf.profile's kernel names, in order, for the whole step (forward, backward, the reads). */
  kernels: string[];
}

/** One step's loss and gradients (every parameter trained) on the active backend. */
async function trainingStep(packing: TrainOptions['packing']): Promise<Step> {
  const params = toParams(initWeights(cfg, 5), true);
  const trainable = Object.values(params) as tf.Variable[];
  try {
    const opts: TrainOptions = { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, packing };
    let step: Omit<Step, 'kernels'> = { loss: 0, grads: [] };
    const run = async () => void (step = await readBatchGradients(batchGradients({ cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null }, samples(), opts)));
    // tf.profile hands back the engine's one profile object, which the next profile empties: read it at once.
    const kernels = (await tf.profile(run)).kernels.map((k) => k.name);
    return { ...step, kernels };
  } finally {
    tf.dispose(trainable);
  }
}

/** f32 sums in other orders through two layers, attention and the loss (lavapipe: loss 3e-7, gradients ≤ 1.1e-6). */
const REL_TOL = 1e-5;

/** |Δloss| / |loss|, and per parameter ‖Δgrad‖ / ‖grad‖ (the cpu's as reference). */
function expectCpu(got: Step, want: Step): void {
  expect(Math.abs(want.loss)).toBeGreaterThan(1e-3);
  expect(Math.abs(got.loss - want.loss) / Math.abs(want.loss)).toBeLessThan(REL_TOL);
  expect(got.grads.length).toBe(want.grads.length);
  got.grads.forEach((g, i) => {
    let diff = 0;
    let norm = 0;
    g.forEach((x, j) => ((diff += (x - want.grads[i][j]) ** 2), (norm += want.grads[i][j] ** 2)));
    expect(norm, `gradient ${i}`).toBeGreaterThan(0);
    expect(Math.sqrt(diff / norm), `gradient ${i}`).toBeLessThan(REL_TOL);
  });
}

const count = (kernels: string[], name: string) => kernels.filter((k) => k === name).length;

/** Per layer the input and post norms and the q and k norms, then the final norm: forwards only (the gradient is tf's). */
const NORMS = 4 * layers + 1;
/** q and k per layer, forward and backward (the adjoint rotation). */
const ROPES = 2 * 2 * layers;

/** The step with our three kernels unregistered on webgpu (the forward then takes the tf compositions), re-registered after. */
async function withoutOurKernels<T>(f: () => Promise<T>): Promise<T> {
  for (const name of [RMS_NORM_KERNEL, ROPE_KERNEL, SWIGLU_KERNEL]) tf.unregisterKernel(name, 'webgpu');
  try {
    return await f();
  } finally {
    registerRmsNorm();
    registerRope();
    registerSwiglu();
  }
}

describe.skipIf(skipReason !== null)(`the model's kernels in training on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('selects webgpu', async () => {
    expect((await selectBackend('webgpu', { syncReads: false })).name).toBe('webgpu'); // a failed self-check fails here
    setFusedKernels('off'); // the separate kernels counted here (AGENTJET_WEBGPU_FUSED=on folds norms into products: fused-matmul.test.ts)
  });

  for (const packing of ['tree', 'rows'] as const) {
    it(`a training step (${packing}) dispatches our RMSNorm, RoPE and SwiGLU and gives the cpu loss and gradients`, async () => {
      await tf.setBackend('cpu');
      const want = await trainingStep(packing);
      await tf.setBackend('webgpu'); // selectBackend returns early once it has selected webgpu
      const got = await trainingStep(packing);
      expect([count(got.kernels, RMS_NORM_KERNEL), count(got.kernels, ROPE_KERNEL), count(got.kernels, SWIGLU_KERNEL)]).toEqual([NORMS, ROPES, layers]);
      expectCpu(got, want);
      const composed = await withoutOurKernels(() => trainingStep(packing));
      expect(count(composed.kernels, RMS_NORM_KERNEL) + count(composed.kernels, ROPE_KERNEL) + count(composed.kernels, SWIGLU_KERNEL)).toBe(0);
      expectCpu(composed, want);
      console.log(`kernels per training step (${packing}, ${layers} layers) on webgpu: ${composed.kernels.length} with the compositions, ${got.kernels.length} with ours`);
      expect(got.kernels.length).toBeLessThan(composed.kernels.length);
    });
  }
});
