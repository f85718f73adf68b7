/**
 * The WebGPU tests skip only when no adapter exists. Here the numerics self-check is made to fail (the cpu
 * reference's Softmax is broken before any backend is selected, in this file's own process): selecting webgpu must
 * then reject, naming the self-check, while webgpuSkipReason still says "run". So a regression in the self-check
 * fails worker/webgpu.test.ts instead of reading as skipped.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

/** The cpu Softmax, negated: the self-check's reference goes wrong. */
function breakCpuSoftmax(): void {
  const original = tf.getKernel(tf.Softmax, 'cpu')!;
  const neg = tf.getKernel(tf.Neg, 'cpu')!;
  tf.unregisterKernel(tf.Softmax, 'cpu');
  tf.registerKernel({
    ...original,
    kernelFunc: (args) => {
      const soft = original.kernelFunc(args) as tf.TensorInfo;
      const out = neg.kernelFunc({ inputs: { x: soft }, backend: args.backend, attrs: {} }) as tf.TensorInfo;
      (args.backend as tf.KernelBackend).disposeData(soft.dataId);
      return out;
    },
  });
}

describe.skipIf(skipReason !== null)(`a failing self-check on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('fails the selection (a test failure), while the skip reason stays null', async () => {
    breakCpuSoftmax();
    const failure = await selectBackend('webgpu', { syncReads: false }).then(
      () => null,
      (err: unknown) => err as Error,
    );
    expect(failure?.name).toBe('BackendUnavailableError');
    expect(failure?.message).toMatch(/webgpu: failed the numerics self-check/);
    expect(await webgpuSkipReason()).toBeNull();
  });
});
