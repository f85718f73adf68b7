/**
 * Our webgpu BatchMatMul against the cpu backend on seeded random operands (cases in testing/checks.ts): odd
 * sizes that leave every tile edge partial, both transposes, batched and broadcast 3-/4-D products, decode-shaped
 * (skinny) products, and the gradient. f32 within float tolerance; f16 (where the device compiles shader-f16)
 * within f16's rounding, and measurably different from f32, so the f16 path is known to have run; the same for
 * mixed-precision training's products (withF16Matmuls), B held in f16 or not. Skips only
 * without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import { webgpuFeatures } from './device.ts';
import { matmulStats, setMatmulKernel } from './matmul.ts';
import { MatmulAddendShapeError } from './matmul.ts';
import { matMulPlus } from './matmul-add.ts';
import { matmulAddChecks, matmulCases, matmulChecks, matmulGradientCheck, mixedMatmulChecks } from './testing/checks.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

describe.skipIf(skipReason !== null)(`our webgpu BatchMatMul vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the engine test covers that)
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here // a failed self-check fails here
  });

  it('tiled-f32 matches on odd, transposed, batched and broadcast shapes, through our shaders', async () => {
    const before = { ...matmulStats };
    for (const c of await matmulChecks('tiled-f32')) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(matmulStats.fallback - before.fallback).toBe(0);
    expect(matmulStats.skinny - before.skinny).toBeGreaterThan(0);
    expect(matmulStats.tiled - before.tiled).toBeGreaterThan(0);
    expect(matmulStats.tiled + matmulStats.skinny - before.tiled - before.skinny).toBe(matmulCases().length);
  });

  it('tiled-f16 matches within f16 rounding where shader-f16 compiles, and is not silently f32', async (ctx) => {
    if (!webgpuFeatures()?.shaderF16) ctx.skip(); // the device lacks shader-f16 (lavapipe and GPUs have it)
    const before = matmulStats.f16;
    const checks = await matmulChecks('tiled-f16');
    for (const c of checks) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(matmulStats.f16 - before).toBe(matmulCases().length);
    expect(Math.max(...checks.map((c) => c.f32Ratio))).toBeGreaterThan(1); // f16's rounding shows: f32's tolerance fails it
  });

  it('mixed precision (training) matches within f16 rounding, with B held in f16 or rounded as staged', async (ctx) => {
    if (!webgpuFeatures()?.shaderF16) ctx.skip();
    for (const held of [true, false]) {
      const before = { ...matmulStats };
      const checks = await mixedMatmulChecks(held);
      for (const c of checks) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
      expect(matmulStats.mixed - before.mixed).toBe(matmulCases().length); // skinny shapes too: all tiled
      expect(matmulStats.skinny - before.skinny).toBe(0);
      expect(matmulStats.mixedF16Weights - before.mixedF16Weights).toBe(held ? matmulCases().length : 0);
      expect(Math.max(...checks.map((c) => c.f32Ratio))).toBeGreaterThan(1); // f16's rounding shows
    }
  });

  it("the 'tfjs' choice runs tfjs's kernel (the fallback), which matches too", async () => {
    const before = matmulStats.fallback;
    // A few cases: lavapipe compiles one tfjs shader per shape (about a second each).
    const cases = matmulCases().filter((_, i) => i % 9 === 0);
    for (const c of await matmulChecks('tfjs', cases)) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(matmulStats.fallback - before).toBe(cases.length);
  });

  it("refuses, by name, an operand larger than the device's storage binding (bound anyway, it computes garbage)", async (ctx) => {
    const limit = (tf.backend() as unknown as { device: GPUDevice }).device.limits.maxStorageBufferBindingSize;
    if (limit > 2 ** 29) ctx.skip(); // a GPU's limit (GiBs): more memory than a test should take
    setMatmulKernel('tiled-f32');
    const k = 2048;
    const a = tf.ones([1, k]);
    const b = tf.ones([k, Math.ceil((limit / 4 + 1) / k)]); // just over the limit, in a shape our kernel takes
    expect(() => tf.matMul(a, b)).toThrow(expect.objectContaining({ name: 'BindingTooLargeError' }));
    tf.dispose([a, b]);
  });

  it('gives the cpu gradient of a two-matmul expression (transposed products in the backward pass)', async (ctx) => {
    const f32 = await matmulGradientCheck('tiled-f32');
    expect(f32.ratio, f32.name).toBeLessThanOrEqual(1);
    if (!webgpuFeatures()?.shaderF16) ctx.skip();
    const f16 = await matmulGradientCheck('tiled-f16');
    expect(f16.ratio, f16.name).toBeLessThanOrEqual(1);
  });

  it('adds a residual or a bias in the product\'s stores with every kernel that is ours (one dispatch), and through tfjs\'s Add otherwise', async () => {
    const features = webgpuFeatures();
    const checks = [
      ...(await matmulAddChecks('tiled-f32')),
      ...(await matmulAddChecks('tfjs')),
      ...(features?.shaderF16 ? [...(await matmulAddChecks('tiled-f16')), ...(await matmulAddChecks('tiled-f32', { mixed: true }))] : []),
      ...(features?.subgroups ? await matmulAddChecks('subgroup-f32') : []),
    ];
    for (const c of checks) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    setMatmulKernel('tiled-f32');
    const [x, w] = [tf.ones([2, 3]) as tf.Tensor2D, tf.ones([3, 4]) as tf.Tensor2D];
    expect(() => matMulPlus(x, w, tf.ones([3]))).toThrow(MatmulAddendShapeError);
    expect(() => matMulPlus(x, w, tf.ones([4, 2]))).toThrow(MatmulAddendShapeError);
    // Its gradient: the product's, and the addend's (the output's for a residual, summed over rows for a bias).
    const bias = tf.tensor1d([1, 2, 3, 4]);
    const [dx, dw, db] = tf.grads((a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(matMulPlus(a as tf.Tensor2D, b as tf.Tensor2D, c), tf.range(0, 8).reshape([2, 4]))))([x, w, bias]);
    expect(Array.from(await db.data())).toEqual([4, 6, 8, 10]);
    expect(Array.from(await dx.data())).toEqual([6, 6, 6, 22, 22, 22]);
    expect(Array.from(await dw.data())).toEqual([4, 6, 8, 10, 4, 6, 8, 10, 4, 6, 8, 10]);
    tf.dispose([x, w, bias, dx, dw, db]);
  });
});
