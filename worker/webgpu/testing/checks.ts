/**
 * Every numerics check of our webgpu kernels against the cpu backend, as data: each returns named ratios
 * (worst |got − want| / tolerance; ≤ 1 passes). The tests (worker/webgpu/*.test.ts) assert on them, and the device
 * script (bench/device/gpu-check.ts kernels) runs the same ones on a GPU and writes them into its JSON, so the GPU
 * run and CI check one list of cases.
 *
 * Run with webgpu selected (selectBackend('webgpu', { syncReads: false })); each check switches between the cpu and
 * webgpu backends itself and leaves webgpu active.
 */
import * as tf from '@tensorflow/tfjs';
import { applyRope as modelApplyRope, rmsNorm as modelRmsNorm, ropeTables } from '../../model.ts';
import { ELEMENTWISE_WORKGROUP, MAX_WORKGROUPS_PER_DIMENSION } from '../gpu.ts';
import { type MatmulKernel, setMatmulKernel, SKINNY_MAX_ROWS } from '../matmul.ts';
import { type RmsReduction, rmsNorm, setRmsNormReduction } from '../rms-norm.ts';
import { applyRope } from '../rope.ts';
import { swiglu, swigluReference } from '../swiglu.ts';
import { randomArray, runOn, worstRatio } from './gpu.ts';

export interface Check {
  name: string;
  /** Worst error over the tolerance: ≤ 1 passes. */
  ratio: number;
}

type Inputs = { data: Float32Array; shape: number[] }[];

const size = (shape: number[]) => shape.reduce((p, d) => p * d, 1);

/** cpu result of `want`, webgpu result of `got`, on the same inputs: the worst ratio per output. */
async function compare(inputs: Inputs, want: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[], got: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[], atol: number, rtol: number): Promise<number> {
  const w = await runOn('cpu', inputs, want);
  const g = await runOn('webgpu', inputs, got);
  return Math.max(...g.map((x, i) => worstRatio(x, w[i], atol, rtol)));
}

// ---------------------------------------------------------------------------------------------------------------
// Matmul

/** [m, k, n]: 1×7×13 and 33×65×17 leave partial tiles everywhere; ≤ SKINNY_MAX_ROWS rows take the skinny shader. */
const MATMUL_SHAPES: [number, number, number][] = [
  [1, 7, 13],
  [33, 65, 17],
  [64, 64, 64],
  [65, 129, 63],
  [3, 300, 200],
  [SKINNY_MAX_ROWS, 1000, 130],
  [SKINNY_MAX_ROWS + 1, 17, 200],
  [130, 260, 97],
];

/** f32: summation order differs from the cpu's; |error| grows with √K (inputs in [−1, 1]). */
export const MATMUL_F32 = { atol: 1e-5, atolPerSqrtK: 1e-5, rtol: 1e-5 };
/** f16: each input rounded to 11 bits (relative 2⁻¹¹), products summed in f32. */
export const MATMUL_F16 = { atol: 1e-3, atolPerSqrtK: 2e-3, rtol: 2e-3 };

export interface MatmulCase {
  a: number[];
  b: number[];
  transposeA: boolean;
  transposeB: boolean;
  k: number;
}

export function matmulCases(): MatmulCase[] {
  const out: MatmulCase[] = [];
  for (const [m, k, n] of MATMUL_SHAPES) {
    for (const transposeA of [false, true]) {
      for (const transposeB of [false, true]) out.push({ a: transposeA ? [k, m] : [m, k], b: transposeB ? [n, k] : [k, n], transposeA, transposeB, k });
    }
  }
  // Batched, and one operand broadcast over the other's batch (the model's attention and its gradient).
  out.push({ a: [3, 33, 65], b: [3, 65, 17], transposeA: false, transposeB: false, k: 65 });
  out.push({ a: [3, 65, 33], b: [3, 17, 65], transposeA: true, transposeB: true, k: 65 });
  out.push({ a: [2, 3, 5, 40], b: [2, 3, 40, 7], transposeA: false, transposeB: false, k: 40 });
  out.push({ a: [4, 9, 31], b: [31, 70], transposeA: false, transposeB: false, k: 31 });
  out.push({ a: [9, 31], b: [4, 70, 31], transposeA: false, transposeB: true, k: 31 });
  out.push({ a: [2, 1, 19], b: [2, 19, 300], transposeA: false, transposeB: false, k: 19 });
  return out;
}

export const matmulCaseName = (c: MatmulCase) => `matmul a[${c.a}]${c.transposeA ? 'ᵀ' : ''} b[${c.b}]${c.transposeB ? 'ᵀ' : ''}`;

/** Each case with `kernel`: the ratio under that kernel's tolerance, and under f32's (f16 must exceed it somewhere). */
export async function matmulChecks(kernel: MatmulKernel, cases = matmulCases()): Promise<(Check & { f32Ratio: number })[]> {
  const out: (Check & { f32Ratio: number })[] = [];
  for (const [i, c] of cases.entries()) {
    const inputs = [
      { data: randomArray(size(c.a), 100 + i), shape: c.a },
      { data: randomArray(size(c.b), 101 + i), shape: c.b },
    ];
    const mm = (a: tf.Tensor, b: tf.Tensor) => tf.matMul(a, b, c.transposeA, c.transposeB);
    const [want] = await runOn('cpu', inputs, mm);
    setMatmulKernel(kernel);
    const [got] = await runOn('webgpu', inputs, mm);
    const tol = kernel === 'tiled-f16' ? MATMUL_F16 : MATMUL_F32;
    const sqrtK = Math.sqrt(c.k);
    out.push({
      name: `${matmulCaseName(c)} ${kernel}`,
      ratio: worstRatio(got, want, tol.atol + tol.atolPerSqrtK * sqrtK, tol.rtol),
      f32Ratio: worstRatio(got, want, MATMUL_F32.atol + MATMUL_F32.atolPerSqrtK * sqrtK, MATMUL_F32.rtol),
    });
  }
  return out;
}

/** The gradient of sum((x·w·v)²) for x and w (transposed products in the backward pass). */
export async function matmulGradientCheck(kernel: MatmulKernel): Promise<Check> {
  const [m, k, n] = [33, 65, 17];
  const inputs = [
    { data: randomArray(m * k, 1), shape: [m, k] },
    { data: randomArray(k * n, 2), shape: [k, n] },
    { data: randomArray(n * 5, 3), shape: [n, 5] },
  ];
  const f = (x: tf.Tensor, w: tf.Tensor, v: tf.Tensor) => tf.grads((a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.square(tf.matMul(tf.matMul(a, b), v))))([x, w]);
  setMatmulKernel(kernel);
  const want = await runOn('cpu', inputs, f);
  const got = await runOn('webgpu', inputs, f);
  // Three chained products: the error scales with the gradient's largest entry (measured on lavapipe: 2e-7 of it
  // in f32, 4e-4 in f16), so the tolerance is a fraction of that.
  const fraction = kernel === 'tiled-f16' ? 2e-3 : 1e-5;
  const ratio = Math.max(...got.map((g, i) => worstRatio(g, want[i], fraction * Math.max(...want[i].map(Math.abs)), 0)));
  return { name: `matmul gradient ${kernel}`, ratio };
}

// ---------------------------------------------------------------------------------------------------------------
// RMSNorm

const RMS_EPS = 1e-6;
/** x in [−2, 2): y is O(1); f32 sums of ≤ 5k squares in another order. */
export const RMS_TOL = { atol: 1e-5, rtol: 1e-5 };
/** [...rows, d]: one-element rows, odd widths, Qwen2.5-0.5B's 896, and more rows than one grid dimension holds. */
const RMS_SHAPES: number[][] = [[1, 7], [33, 65], [3, 5, 896], [2, 4097], [4, 2, 3, 64], [MAX_WORKGROUPS_PER_DIMENSION + 3, 3]];

export async function rmsNormChecks(reduction: RmsReduction): Promise<Check[]> {
  setRmsNormReduction(reduction);
  const out: Check[] = [];
  for (const [i, shape] of RMS_SHAPES.entries()) {
    const d = shape[shape.length - 1];
    const inputs = [
      { data: randomArray(size(shape), 10 + i, 2), shape },
      { data: randomArray(d, 11 + i, 1.5), shape: [d] },
    ];
    const ratio = await compare(inputs, (x, w) => modelRmsNorm(x, w, RMS_EPS), (x, w) => rmsNorm(x, w, RMS_EPS), RMS_TOL.atol, RMS_TOL.rtol);
    out.push({ name: `rmsNorm [${shape}] ${reduction}`, ratio });
  }
  return out;
}

export async function rmsNormGradientCheck(): Promise<Check> {
  const shape = [3, 5, 67];
  const inputs = [
    { data: randomArray(size(shape), 1, 2), shape },
    { data: randomArray(67, 2, 1.5), shape: [67] },
    { data: randomArray(size(shape), 3), shape },
  ];
  const f = (norm: typeof rmsNorm) => (x: tf.Tensor, w: tf.Tensor, r: tf.Tensor) => tf.grads((a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.mul(norm(a, b, RMS_EPS), r)))([x, w]);
  return { name: `rmsNorm gradient [${shape}]`, ratio: await compare(inputs, f(modelRmsNorm), f(rmsNorm), 1e-4, 1e-4) };
}

// ---------------------------------------------------------------------------------------------------------------
// RoPE

/** One mul-add per element from the same f32 tables: only rounding differs. */
export const ROPE_TOL = { atol: 1e-6, rtol: 1e-5 };

export interface RopeCase {
  shape: [number, number, number, number]; // [B, T, heads, hd]
  firstPosition: number;
  theta: number;
}

/** Qwen2.5-0.5B's heads (14 query / 2 KV of 64), positions past 8k (large angles), the smallest head (hd = 2). */
export const ROPE_CASES: RopeCase[] = [
  { shape: [2, 7, 3, 8], firstPosition: 0, theta: 10_000 },
  { shape: [1, 33, 14, 64], firstPosition: 5, theta: 1_000_000 },
  { shape: [3, 17, 2, 64], firstPosition: 8_190, theta: 1_000_000 },
  { shape: [1, 5, 1, 2], firstPosition: 1, theta: 10_000 },
];

/** x, cos, sin (the model's tables) and a random cotangent r, for a case. */
export function ropeInputs(c: RopeCase, seed: number): Inputs {
  const [, t, , hd] = c.shape;
  const tables = ropeTables(hd, c.theta, Array.from({ length: t }, (_, i) => c.firstPosition + i));
  return [
    { data: randomArray(size(c.shape), seed), shape: c.shape },
    { data: tables.cos, shape: [t, hd] },
    { data: tables.sin, shape: [t, hd] },
    { data: randomArray(size(c.shape), seed + 1), shape: c.shape },
  ];
}

export const modelRope = (x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) => modelApplyRope(x as tf.Tensor4D, cos, sin);

export async function ropeChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, c] of ROPE_CASES.entries()) {
    const forward = await compare(ropeInputs(c, 20 + i).slice(0, 3), modelRope, applyRope, ROPE_TOL.atol, ROPE_TOL.rtol);
    out.push({ name: `rope [${c.shape}] from ${c.firstPosition}`, ratio: forward });
    const grad = (rope: (x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) => tf.Tensor) => (x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor, r: tf.Tensor) => tf.grad((a: tf.Tensor) => tf.sum(tf.mul(rope(a, cos, sin), r)))(x);
    out.push({ name: `rope gradient [${c.shape}] from ${c.firstPosition}`, ratio: await compare(ropeInputs(c, 40 + i), grad(modelRope), grad(applyRope), ROPE_TOL.atol, ROPE_TOL.rtol) });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// SwiGLU

/** exp and a division per element: a few ulps apart from the cpu's sigmoid. */
export const SWIGLU_TOL = { atol: 1e-6, rtol: 1e-5 };
/** Odd sizes, and more elements than one grid dimension of workgroups covers. */
const SWIGLU_SHAPES: number[][] = [[1, 7], [33, 65], [3, 5, 17], [1, ELEMENTWISE_WORKGROUP * MAX_WORKGROUPS_PER_DIMENSION + 5]];

export async function swigluChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, shape] of SWIGLU_SHAPES.entries()) {
    const inputs = [
      { data: randomArray(size(shape), 30 + i, 100), shape }, // gates up to ±100: sigmoid saturates both ways
      { data: randomArray(size(shape), 31 + i, 2), shape },
    ];
    out.push({ name: `swiglu [${shape}]`, ratio: await compare(inputs, swigluReference, swiglu, SWIGLU_TOL.atol, SWIGLU_TOL.rtol) });
  }
  const shape = [9, 130];
  const inputs = [
    { data: randomArray(size(shape), 1, 6), shape },
    { data: randomArray(size(shape), 2, 2), shape },
    { data: randomArray(size(shape), 3), shape },
  ];
  const f = (op: typeof swiglu) => (g: tf.Tensor, u: tf.Tensor, r: tf.Tensor) => tf.grads((a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.mul(op(a, b), r)))([g, u]);
  out.push({ name: `swiglu gradient [${shape}]`, ratio: await compare(inputs, f(swigluReference), f(swiglu), 1e-5, 1e-5) });
  return out;
}

/** Every check, for the device script; the reductions and precisions the device lacks are left out (and said so). */
export async function allKernelChecks(features: { shaderF16: boolean; subgroups: boolean }): Promise<{ checks: Check[]; notRun: string[] }> {
  const checks: Check[] = [];
  const notRun: string[] = [];
  checks.push(...(await matmulChecks('tiled-f32')), await matmulGradientCheck('tiled-f32'));
  if (features.shaderF16) checks.push(...(await matmulChecks('tiled-f16')), await matmulGradientCheck('tiled-f16'));
  else notRun.push('matmul tiled-f16 (no shader-f16)');
  setMatmulKernel('tiled-f32');
  checks.push(...(await rmsNormChecks('workgroup')));
  if (features.subgroups) checks.push(...(await rmsNormChecks('subgroups')));
  else notRun.push('rmsNorm subgroups (no subgroups)');
  checks.push(await rmsNormGradientCheck(), ...(await ropeChecks()), ...(await swigluChecks()));
  return { checks, notRun };
}
