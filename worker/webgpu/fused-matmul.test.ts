/**
 * The fused kernels (fused-norm-matmul.ts, fused-swiglu-matmul.ts) against the unfused compositions on the cpu
 * backend (cases in testing/fused-checks.ts): forward and gradient, decode- and training-shaped rows, both gate/up
 * layouts, with and without the norm, f16 weights where the device has shader-f16; the model's logits and gradients with them forced on, off and on the cpu;
 * calibration's choice and report; and the comparisons can fail. Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import { createEngineFromWeights } from '../engine.ts';
import { initWeights, rmsNorm as modelRmsNorm } from '../model.ts';
import { tinyByteConfig, tinyConfig } from '../testing/configs.ts';
import { featuresOf } from './device.ts';
import { calibrateFusedKernels } from './fused-calibration.ts';
import { fusedKernelPays, fusedKernelsMode, fusedStats, NORM_MATMUL_KERNEL, setFusedKernels, SWIGLU_MATMUL_KERNEL, UnknownFusedModeError } from './fused-matmul.ts';
import { normMatmul } from './fused-norm-matmul.ts';
import { swigluMatmul } from './fused-swiglu-matmul.ts';
import { asWebGpu } from './gpu.ts';
import { setMatmulKernel, withF16Matmuls } from './matmul.ts';
import { swigluReference } from './swiglu.ts';
import { FUSED_FRACTION, fusedF16WeightChecks, fusedGradientChecks, fusedModelChecks, normMatmulBiasChecks, normMatmulChecks, swigluMatmulChecks } from './testing/fused-checks.ts';
import { kernelsRun, randomArray, runOn, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

const pass = (checks: { name: string; ratio: number }[]) => {
  for (const c of checks) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
};

describe.skipIf(skipReason !== null)(`fused RMSNorm/SwiGLU products on webgpu vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
  });

  it('norm·matmul matches forward on decode, training and batched shapes, in one kernel, a bias added in it too', async () => {
    pass(await normMatmulChecks());
    pass(await normMatmulBiasChecks());
    const inputs = [
      { data: randomArray(3 * 9, 1), shape: [3, 9] },
      { data: randomArray(9, 2), shape: [9] },
      { data: randomArray(9 * 5, 3), shape: [9, 5] },
    ];
    const kernels = await kernelsRun(inputs, (x, nw, w) => normMatmul(x, nw as tf.Tensor1D, 1e-6, w as tf.Tensor2D));
    expect(kernels.filter((k) => k !== 'Reshape')).toEqual([NORM_MATMUL_KERNEL]); // no norm, no product of its own
  });

  it('swiglu·matmul matches forward for both gate/up layouts, with and without the norm, in one kernel', async () => {
    pass(await swigluMatmulChecks());
  });

  it('gives the cpu gradients of both ops for every input', async () => {
    pass(await fusedGradientChecks());
  });

  it("gives the model's logits and gradients with fused kernels on as off and as the cpu, dispatching them only when on", async () => {
    pass(await fusedModelChecks());
  });

  it('reads the f16 copies of the weights where the matmul kernel is an f16 one: within f16 rounding, and on decode rows as the unfused products', async (context) => {
    if (!featuresOf(asWebGpu(tf.backend()).device).shaderF16) context.skip('the adapter has no shader-f16');
    pass(await fusedF16WeightChecks());
  });

  it('the comparisons can fail: a different eps, and gate and up swapped', async () => {
    const inputs = [
      { data: randomArray(33 * 65, 5, 0.01), shape: [33, 65] },
      { data: randomArray(65, 6), shape: [65] },
      { data: randomArray(65 * 17, 7), shape: [65, 17] },
    ];
    const [want] = await runOn('cpu', inputs, (x, nw, w) => tf.matMul(modelRmsNorm(x, nw, 1e-6) as tf.Tensor2D, w as tf.Tensor2D));
    const [got] = await runOn('webgpu', inputs, (x, nw, w) => normMatmul(x, nw as tf.Tensor1D, 1e-3, w as tf.Tensor2D));
    expect(worstRatio(got, want, FUSED_FRACTION * 10, 0)).toBeGreaterThan(1);
    const gated = [
      { data: randomArray(9 * 40, 8), shape: [9, 40] },
      { data: randomArray(40 * 30, 9), shape: [40, 30] },
      { data: randomArray(40 * 30, 10), shape: [40, 30] },
    ];
    const [wantG] = await runOn('cpu', gated, (x, g, u) => swigluReference(tf.matMul(x, u), tf.matMul(x, g)));
    const [gotG] = await runOn('webgpu', gated, (x, g, u) => swigluMatmul(x, { gate: g as tf.Tensor2D, up: u as tf.Tensor2D }, null));
    expect(worstRatio(gotG, wantG, 1e-3, 0)).toBeGreaterThan(1);
  });

  it('runs only where chosen: forced off, inside mixed precision, or unmeasured under auto it does not', async () => {
    const x = tf.zeros([4, 8]);
    try {
      setFusedKernels('on');
      expect(fusedKernelPays('normMatmul', 4)).toBe(true);
      expect(withF16Matmuls(() => fusedKernelPays('swigluMatmul', 4))).toBe(false); // f16 products stay unfused
      setFusedKernels('off');
      expect(fusedKernelPays('normMatmul', 4)).toBe(false);
      setFusedKernels('auto');
      expect(fusedKernelPays('swigluMatmul', 100)).toBe(false); // not measured yet
      expect(() => setFusedKernels('sometimes' as 'on')).toThrow(UnknownFusedModeError);
    } finally {
      setFusedKernels('auto');
      x.dispose();
    }
  });

  it("calibration times fused against unfused on the model's shapes per use and reports the choice", async () => {
    const report = await calibrateFusedKernels(tinyConfig());
    expect(report).toMatch(/^fused norm·matmul: decode (fused|unfused) \(.* ms\), prefill (fused|unfused) .*, train (fused|unfused) .*; swiglu·matmul: decode /);
    // Each fused result was checked against the unfused one, and agreed here.
    expect(report).not.toContain('failed its check');
    expect(fusedKernelsMode()).toBe('auto');
    // The choice is what the report says (train: under a tape).
    const decodeFused = /norm·matmul: decode fused/.test(report);
    expect(fusedKernelPays('normMatmul', 1)).toBe(decodeFused);
    const trainFused = /swiglu·matmul: .*train fused/.test(report);
    expect(tf.grad((a: tf.Tensor) => (expect(fusedKernelPays('swigluMatmul', 100)).toBe(trainFused), tf.sum(a)))(tf.ones([2]))).toBeDefined();
    setFusedKernels('off');
    expect(await calibrateFusedKernels(tinyConfig())).toBe('fused: off (chosen, not measured)');
    setFusedKernels('auto');
    expect(SWIGLU_MATMUL_KERNEL).toBe('AgentJetSwigluMatmul');
  });

  it('decodes on the device (fused q/k/v and gate/up weights) to the tokens and logprobs of the unfused kernels', async () => {
    const cfg = tinyByteConfig({ max_position_embeddings: 96 });
    const generateWith = async (mode: 'on' | 'off') => {
      setFusedKernels(mode);
      const engine = await createEngineFromWeights({ name: 'fused-decode', config: cfg, weights: initWeights(cfg, 7), tokenizer: null, backend: 'webgpu', seed: 1 });
      try {
        const prompts = [Array.from({ length: 21 }, (_, i) => (i * 5 + 2) % 250), Array.from({ length: 9 }, (_, i) => (i * 3 + 7) % 250)];
        const sampling = { maxTokens: 12, temperature: 0, topP: 1, topK: 0, stopTokenIds: [], stopStrings: [], topLogprobs: 0 };
        return await Promise.all(prompts.map((promptIds) => engine.generate({ promptIds, sampling })));
      } finally {
        await engine.close();
      }
    };
    try {
      const before = { ...fusedStats };
      const fused = await generateWith('on');
      // The decode steps ran the fused kernels: one of each per layer per step at least.
      expect(fusedStats.normMatmul - before.normMatmul).toBeGreaterThanOrEqual(cfg.num_hidden_layers * 11);
      expect(fusedStats.swigluMatmul - before.swigluMatmul).toBeGreaterThanOrEqual(cfg.num_hidden_layers * 11);
      const plain = await generateWith('off');
      fused.forEach((r, i) => {
        expect(r.tokens.map((t) => t.id)).toEqual(plain[i].tokens.map((t) => t.id));
        r.tokens.forEach((t, j) => expect(t.logprob).toBeCloseTo(plain[i].tokens[j].logprob, 4));
      });
    } finally {
      setFusedKernels('auto');
    }
  });

  it("an engine on webgpu measures them on its model and reports the choice in its backend's kernels", async () => {
    const cfg = tinyByteConfig();
    const engine = await createEngineFromWeights({ name: 'fused-test', config: cfg, weights: initWeights(cfg, 3), tokenizer: null, backend: 'webgpu', seed: 1 });
    try {
      expect(engine.info.backend.kernels).toMatch(/^matmul.*; fused norm·matmul: decode .*; swiglu·matmul: decode /);
    } finally {
      await engine.close();
    }
  });
});
