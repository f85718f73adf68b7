/**
 * The measured backend choice: with the model given, WebGPU (where an adapter exists: lavapipe here) is measured
 * against the best CPU backend on the model's shapes, the faster is chosen, and the status says both figures.
 * Without an adapter the same call picks the CPU backend without a probe. The decision rule itself is checked on
 * made-up figures, and a probe whose logits miss their exact sum is refused.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { cannotHold, checkLogits, describeProbe, expectedLogitSum, fasterOf } from './backend-probe.ts';
import type { BackendProbe } from './common/engine.ts';
import { tinyByteConfig } from './testing/configs.ts';
import { QWEN2_5_0_5B } from '../bench/model.ts';
import { webgpuSkipReason } from './webgpu/testing/gpu.ts';

const noAdapter = await webgpuSkipReason();

const probe = (over: Partial<BackendProbe>): BackendProbe => ({ name: 'wasm', decodeMsPerToken: 1, trainMsPerToken: 1, msPerToken: 2, logitSum: 100, complete: true, ...over });

describe('fasterOf', () => {
  it('picks the lower cost per token, whichever backend it is', () => {
    const gpu = probe({ name: 'webgpu', msPerToken: 1.5 });
    const cpu = probe({ name: 'wasm', msPerToken: 2 });
    expect(fasterOf(gpu, cpu).winner.name).toBe('webgpu');
    expect(fasterOf({ ...gpu, msPerToken: 3 }, cpu).winner.name).toBe('wasm');
    expect(describeProbe(gpu)).toMatch(/^webgpu 1\.50 ms\/token \(decode/);
  });
});

describe('checkLogits', () => {
  it('refuses a probe whose logits miss their exact sum (dropped command buffers read as zeros, too-large bindings as garbage)', () => {
    const cfg = tinyByteConfig();
    expect(expectedLogitSum(cfg)).toBeCloseTo(64 * 0.01 * 264, 9);
    expect(() => checkLogits(probe({ logitSum: expectedLogitSum(cfg) * 1.001 }), cfg)).not.toThrow();
    for (const logitSum of [0, NaN, 14.42, -expectedLogitSum(cfg)]) {
      expect(() => checkLogits(probe({ name: 'webgpu', logitSum }), cfg)).toThrow(expect.objectContaining({ name: 'ProbeDisagreementError' }));
    }
  });
});

describe('cannotHold', () => {
  it("refuses wasm a model whose training state exceeds its 4 GiB (probing it there aborts the module), nothing else", () => {
    expect(cannotHold('wasm', QWEN2_5_0_5B)).toMatch(/^cannot hold the model's training state in wasm's 4 GiB \(494M parameters/);
    expect(cannotHold('wasm', tinyByteConfig())).toBeNull();
    expect(cannotHold('cpu', QWEN2_5_0_5B)).toBeNull();
    expect(cannotHold('tensorflow', QWEN2_5_0_5B)).toBeNull();
  });
});

describe('selectBackend with the model given', () => {
  it(noAdapter ? `picks a CPU backend without a probe (no adapter: ${noAdapter})` : 'measures WebGPU against the best CPU backend on the model and picks the faster', async () => {
    const report = await selectBackend(undefined, { syncReads: false, model: tinyByteConfig(), modelParameters: 1 });
    if (noAdapter) {
      expect(report.probe).toBeUndefined();
      expect(report.name).not.toBe('webgpu');
      return;
    }
    // modelParameters says "tiny", which alone would pass over WebGPU: the model given means it is measured instead.
    expect(report.probe?.map((p) => p.name)[0]).toBe('webgpu');
    const [gpu, cpu] = report.probe!;
    for (const p of [gpu, cpu]) {
      expect(p.decodeMsPerToken).toBeGreaterThan(0);
      expect(p.trainMsPerToken).toBeGreaterThan(0);
      expect(p.msPerToken).toBeCloseTo(p.decodeMsPerToken + p.trainMsPerToken, 9);
      // Whether the probe finished inside its budget depends on the machine (lavapipe compiles every shader cold);
      // when it did not, the report says so.
      if (!p.complete) expect(report.reason + JSON.stringify(report.passedOver)).toMatch(new RegExp(`${p.name} [^)]*stopped at the probe budget`));
    }
    expect(gpu.logitSum).toBeCloseTo(expectedLogitSum(tinyByteConfig()), 1); // both computed the probe right
    expect(cpu.logitSum).toBeCloseTo(expectedLogitSum(tinyByteConfig()), 1);
    const winner = gpu.msPerToken < cpu.msPerToken ? gpu : cpu;
    const loser = winner === gpu ? cpu : gpu;
    expect(report.name).toBe(winner.name);
    expect(report.reason).toMatch(/^measured on the model: /);
    expect(report.passedOver.find((p) => p.name === loser.name)?.reason).toMatch(/^measured slower on the model/);
    expect(tf.getBackend()).toBe(winner.name === 'tensorflow-gpu' ? 'tensorflow' : winner.name);
  });

  it('measures nothing when a backend is forced', async () => {
    const report = await selectBackend('cpu', { syncReads: false, model: tinyByteConfig() });
    expect(report.name).toBe('cpu');
    expect(report.reason).toBe('forced by option');
    expect(report.probe).toBeUndefined();
  });
});
