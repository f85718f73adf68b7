import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';

describe('selectBackend', () => {
  it('passes over WebGPU for a small model when choosing by itself, and says why', async () => {
    // First in this file: selection happens once per thread.
    const report = await selectBackend(undefined, { syncReads: false, modelParameters: 3_200_000 });
    expect(report.name).not.toBe('webgpu');
    expect(report.passedOver.find((p) => p.name === 'webgpu')?.reason).toMatch(/3\.2M parameters samples faster on the CPU/);
  });

  it('picks the best backend that loads and passes the self-check, with reasons for the ones passed over', async () => {
    const report = await selectBackend();
    // Native tfjs-node(-gpu) and a WebGPU adapter are absent on CI machines like this one; wasm always loads.
    expect(['tensorflow-gpu', 'webgpu', 'tensorflow', 'wasm']).toContain(report.name);
    expect(report.selfCheck.ok).toBe(true);
    expect(report.selfCheck.maxAbsError).toBeLessThan(1e-3);
    for (const p of report.passedOver) expect(p.reason.length).toBeGreaterThan(0);
    if (report.name === 'wasm') expect(report.passedOver.map((p) => p.name)).toEqual(['tensorflow-gpu', 'webgpu', 'tensorflow']);
    expect(tf.getBackend()).toBe(report.name === 'tensorflow-gpu' ? 'tensorflow' : report.name);
  });

  it('honours a forced backend and refuses an unknown one by name', async () => {
    const report = await selectBackend('cpu');
    expect(report.name).toBe('cpu');
    expect(report.reason).toBe('forced by option');
    expect(tf.getBackend()).toBe('cpu');
    await expect(selectBackend('nope' as 'cpu')).rejects.toMatchObject({ name: 'BackendUnavailableError' });
  });

  it('makes its choice current again when asked after tfjs was switched to another backend', async () => {
    const report = await selectBackend('cpu');
    await tf.setBackend('wasm');
    expect(await selectBackend('cpu')).toBe(report);
    expect(tf.getBackend()).toBe('cpu');
  });

  it('refuses a forced webgpu backend to a caller that reads synchronously: Node has no synchronous GPU readback', async () => {
    // Without an adapter (CI) for that reason; with one (a GPU, lavapipe) because dataSync fails. The engine asks
    // with syncReads: false and gets it (worker/webgpu.test.ts).
    await expect(selectBackend('webgpu')).rejects.toMatchObject({ name: 'BackendUnavailableError' });
  });
});
