/**
 * Every numerics check of our webgpu kernels against the cpu backend, as data (the paged decode ones in
 * paged-checks.ts, device sampling against the host sampler in sample-checks.ts): each returns named ratios (worst
 * |got − want| / tolerance; ≤ 1 passes). The tests (worker/webgpu/*.test.ts) assert on them, and the device script (bench/device/gpu-check.ts kernels) runs the same
 * ones on a GPU and writes them into its JSON, so the GPU run and CI check one list of cases.
 *
 * Run with webgpu selected (selectBackend('webgpu', { syncReads: false })); each check switches between the cpu and
 * webgpu backends itself and leaves webgpu active.
 */
import * as tf from '@tensorflow/tfjs';
import { causalAttention } from '../../causal-attention.ts';
import { applyRope as modelApplyRope, rmsNorm as modelRmsNorm, ropeTables } from '../../model.ts';
import { behindTrunk, buildPrefixTree, type TreeLayout } from '../../prefix-tree.ts';
import { attentionStats, MAX_HEAD_DIM } from '../attention.ts';
import { ELEMENTWISE_WORKGROUP, MAX_WORKGROUPS_PER_DIMENSION } from '../gpu.ts';
import { matMulPlus } from '../matmul-add.ts';
import { holdF16Copies, type MatmulKernel, matmulStats, setMatmulKernel, setSubgroupSkinnyThreads, SUBGROUP_SKINNY_THREADS, withF16Matmuls } from '../matmul.ts';
import { SKINNY_MAX_ROWS } from '../product-wgsl.ts';
import { type RmsReduction, rmsNorm, setRmsNormReduction } from '../rms-norm.ts';
import { applyRope, ropeHeads } from '../rope.ts';
import { swiglu, swigluHalves, swigluReference } from '../swiglu.ts';
import { randomArray, runOn, worstRatio } from './gpu.ts';
import { fusedChecks } from './fused-checks.ts';
import { pagedChecks } from './paged-checks.ts';
import { sampleChecks } from './sample-checks.ts';

export interface Check {
  name: string;
  /** Worst error over the tolerance: ≤ 1 passes. */
  ratio: number;
}

type Inputs = { data: Float32Array; shape: number[] }[];

const size = (shape: number[]) => shape.reduce((p, d) => p * d, 1);
/** Largest |entry|: gradients' tolerances scale with it. */
const maxAbs = (x: Float32Array) => x.reduce((a, b) => Math.max(a, Math.abs(b)), 0);

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

/**
 * Decode-shaped products for the subgroup skinny shader: every row count 1…SKINNY_MAX_ROWS, each with a K and an N
 * that no subgroup size or column group divides (K = 1 too: most lanes idle; N = 1 and N = 3: a part column group),
 * both transposes each, and batched and broadcast ones.
 */
export function skinnyMatmulCases(): MatmulCase[] {
  const out: MatmulCase[] = [];
  const kn: [number, number][] = [[1, 5], [37, 1], [301, 67], [1031, 3], [9, 130], [130, 9], [3, 257], [515, 66]];
  for (let m = 1; m <= SKINNY_MAX_ROWS; m++) {
    const [k, n] = kn[m - 1];
    for (const transposeA of [false, true]) {
      for (const transposeB of [false, true]) out.push({ a: transposeA ? [k, m] : [m, k], b: transposeB ? [n, k] : [k, n], transposeA, transposeB, k });
    }
  }
  out.push({ a: [3, 2, 45], b: [3, 45, 70], transposeA: false, transposeB: false, k: 45 });
  out.push({ a: [3, 45, 5], b: [3, 70, 45], transposeA: true, transposeB: true, k: 45 });
  out.push({ a: [4, 1, 33], b: [33, 19], transposeA: false, transposeB: false, k: 33 });
  out.push({ a: [7, 33], b: [2, 2, 19, 33], transposeA: false, transposeB: true, k: 33 });
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
    const tol = kernel === 'tiled-f16' || kernel === 'subgroup-f16' ? MATMUL_F16 : MATMUL_F32;
    const sqrtK = Math.sqrt(c.k);
    out.push({
      name: `${matmulCaseName(c)} ${kernel}`,
      ratio: worstRatio(got, want, tol.atol + tol.atolPerSqrtK * sqrtK, tol.rtol),
      f32Ratio: worstRatio(got, want, MATMUL_F32.atol + MATMUL_F32.atolPerSqrtK * sqrtK, MATMUL_F32.rtol),
    });
  }
  return out;
}

/** Products [m, k] · [k, n] with an addend: decode rows (the skinny and subgroup shaders) and training rows (tiled). */
const MATMUL_ADD_SHAPES: [number, number, number][] = [
  [1, 65, 70],
  [5, 33, 129],
  [33, 65, 17],
  [70, 130, 65],
];

/**
 * matMulPlus (matmul-add.ts) with `kernel`, a residual [m, n] and a bias [n] added, against the cpu's product and
 * add, within the kernel's tolerance; and whether the addend went into the product's stores (one dispatch) where our
 * product runs, or (tfjs's kernel, mixed precision) into tfjs's Add.
 */
export async function matmulAddChecks(kernel: MatmulKernel, options: { mixed?: boolean } = {}): Promise<Check[]> {
  const out: Check[] = [];
  setMatmulKernel(kernel);
  const tol = kernel === 'tiled-f16' || kernel === 'subgroup-f16' || options.mixed ? MATMUL_F16 : MATMUL_F32;
  const fused = kernel !== 'tfjs' && !options.mixed;
  for (const [i, [m, k, n]] of MATMUL_ADD_SHAPES.entries()) {
    for (const kind of ['residual', 'bias'] as const) {
      const inputs = [
        { data: randomArray(m * k, 1200 + i), shape: [m, k] },
        { data: randomArray(k * n, 1210 + i), shape: [k, n] },
        kind === 'residual' ? { data: randomArray(m * n, 1220 + i, 3), shape: [m, n] } : { data: randomArray(n, 1230 + i, 3), shape: [n] },
      ];
      const [want] = await runOn('cpu', inputs, (a, b, c) => tf.add(tf.matMul(a as tf.Tensor2D, b as tf.Tensor2D), c));
      const before = matmulStats.epilogues;
      const plus = (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => matMulPlus(a as tf.Tensor2D, b as tf.Tensor2D, c);
      const [got] = await runOn('webgpu', inputs, options.mixed ? (a, b, c) => withF16Matmuls(() => plus(a, b, c)) : plus);
      const ran = matmulStats.epilogues - before;
      const name = `matMulPlus [${m}, ${k}]·[${k}, ${n}] + ${kind} ${kernel}${options.mixed ? ' mixed' : ''}`;
      out.push(
        { name, ratio: worstRatio(got, want, tol.atol + tol.atolPerSqrtK * Math.sqrt(k), tol.rtol) },
        { name: `${name}: ${ran} epilogue dispatches, ${fused ? 1 : 0} wanted`, ratio: ran === (fused ? 1 : 0) ? 0 : Infinity },
      );
    }
  }
  return out;
}

/** Threads of the subgroup skinny shader in subgroupFewThreadsChecks: several column groups per subgroup, and part-full subgroups where they are wider. */
export const SUBGROUP_FEW_THREADS = 24;

/** The skinny cases with 'subgroup-f32' in a SUBGROUP_FEW_THREADS workgroup (named so). */
export async function subgroupFewThreadsChecks(): Promise<Check[]> {
  setSubgroupSkinnyThreads(SUBGROUP_FEW_THREADS);
  try {
    return (await matmulChecks('subgroup-f32', skinnyMatmulCases())).map((c) => ({ name: `${c.name}, ${SUBGROUP_FEW_THREADS} threads`, ratio: c.ratio }));
  } finally {
    setSubgroupSkinnyThreads(SUBGROUP_SKINNY_THREADS);
  }
}

/**
 * Each case in mixed precision (withF16Matmuls): B read from its held f16 copy (`held`, as the master weights are),
 * or as f32 rounded while staged (activations, gradients). Both round A and B to f16 and sum in f32, so f16's
 * tolerance applies; the ratio under f32's shows the rounding happened.
 */
export async function mixedMatmulChecks(held: boolean, cases = matmulCases()): Promise<(Check & { f32Ratio: number })[]> {
  const out: (Check & { f32Ratio: number })[] = [];
  for (const [i, c] of cases.entries()) {
    const inputs = [
      { data: randomArray(size(c.a), 100 + i), shape: c.a },
      { data: randomArray(size(c.b), 101 + i), shape: c.b },
    ];
    const [want] = await runOn('cpu', inputs, (a, b) => tf.matMul(a, b, c.transposeA, c.transposeB));
    const [got] = await runOn('webgpu', inputs, (a, b) => {
      if (held) holdF16Copies([b]);
      return withF16Matmuls(() => tf.matMul(a, b, c.transposeA, c.transposeB));
    });
    const sqrtK = Math.sqrt(c.k);
    out.push({
      name: `${matmulCaseName(c)} mixed${held ? ', B held in f16' : ''}`,
      ratio: worstRatio(got, want, MATMUL_F16.atol + MATMUL_F16.atolPerSqrtK * sqrtK, MATMUL_F16.rtol),
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
  const ratio = Math.max(...got.map((g, i) => worstRatio(g, want[i], fraction * maxAbs(want[i]), 0)));
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
  // A decode step's: the first heads of [n, srcHeads, hd] (a position per row), each read times a scale per head or
  // per head and dim, against slicing, multiplying and the model's RoPE.
  for (const [i, [n, srcHeads, heads, hd, scaleWidth]] of [[1, 18, 16, 64, 1], [5, 4, 3, 8, 8], [8, 3, 3, 2, 1]].entries()) {
    const tables = ropeTables(hd, 1_000_000, Array.from({ length: n }, (_, j) => 4_000 + 37 * j));
    const inputs = [
      { data: randomArray(n * srcHeads * hd, 60 + i), shape: [n, srcHeads, hd] },
      { data: randomArray(heads * scaleWidth, 70 + i, 2), shape: [heads, scaleWidth] },
      { data: tables.cos, shape: [n, hd] },
      { data: tables.sin, shape: [n, hd] },
    ];
    const reference = (x: tf.Tensor, scale: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) => tf.reshape(modelRope(tf.reshape(tf.mul(tf.slice(x, [0, 0, 0], [n, heads, hd]), scale), [1, n, heads, hd]), cos, sin), [n, heads, hd]);
    const fused = (x: tf.Tensor, scale: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) => ropeHeads(x as tf.Tensor3D, heads, scale as tf.Tensor2D, cos as tf.Tensor2D, sin as tf.Tensor2D);
    out.push({ name: `rope heads ${heads} of [${n}, ${srcHeads}, ${hd}], scale [${heads}, ${scaleWidth}]`, ratio: await compare(inputs, reference, fused, ROPE_TOL.atol, ROPE_TOL.rtol) });
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
  // The halves of one gate/up product [N, 2·I] (decoding's), read in place: against splitting it first.
  const halvesReference = (gu: tf.Tensor) => swigluReference(...(tf.split(gu, 2, 1) as [tf.Tensor, tf.Tensor]));
  const halves = (gu: tf.Tensor) => swigluHalves(gu as tf.Tensor2D);
  for (const [i, halvesShape] of [[1, 14], [33, 130], [1, 2 * (ELEMENTWISE_WORKGROUP * MAX_WORKGROUPS_PER_DIMENSION + 5)]].entries()) {
    const gu = [{ data: randomArray(size(halvesShape), 40 + i, 50), shape: halvesShape }];
    out.push({ name: `swiglu halves [${halvesShape}]`, ratio: await compare(gu, halvesReference, halves, SWIGLU_TOL.atol, SWIGLU_TOL.rtol) });
  }
  const guShape = [9, 260];
  const guInputs = [
    { data: randomArray(size(guShape), 4, 6), shape: guShape },
    { data: randomArray(size(guShape) / 2, 5), shape: [9, 130] },
  ];
  const g = (op: (gu: tf.Tensor) => tf.Tensor) => (gu: tf.Tensor, r: tf.Tensor) => tf.grads((a: tf.Tensor) => tf.sum(tf.mul(op(a), r)))([gu]);
  out.push({ name: `swiglu halves gradient [${guShape}]`, ratio: await compare(guInputs, g(halvesReference), g(halves), 1e-5, 1e-5) });
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Attention (causal-attention.ts causalAttention: on webgpu the fused kernels of attention.ts, on the cpu its own paths)

export interface AttentionCase {
  name: string;
  groups: number;
  /** Key positions (with a layout, its length). */
  t: number;
  rep: number;
  hd: number;
  queryOffset: number;
  /** Range of q's entries (pre-scaled queries): ~1/sqrt(hd) is the model's, larger makes peaked softmaxes. */
  qScale: number;
  /** The tree layout webgpu attends by (null: causal). */
  layout: TreeLayout | null;
  /** The cpu's, when it is not `layout` (a chain against plain causal attention). */
  reference?: TreeLayout | null;
}

/** A packed prefix tree of token lists (buildPrefixTree; attention needs only the layout). */
export function treeOf(lists: number[][]): TreeLayout {
  return buildPrefixTree(lists.map((tokens) => ({ tokens, lossMask: tokens.map(() => 0), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) })));
}

/**
 * A seeded random prefix tree of `samples` token lists: each keeps a random prefix (possibly none: a new root) of a
 * random earlier one (`nested`: of the one before it, so branches nest deep) and adds 1 to `grow` tokens of its own,
 * so branches hang anywhere and lengths are odd.
 */
export function randomTree(samples: number, grow: number, seed: number, nested = false): TreeLayout {
  const r = randomArray(3 * samples, seed).map((x) => (x + 1) / 2); // [0, 1)
  const lists: number[][] = [];
  let token = 0; // fresh tokens: lists share only the prefixes they copy
  for (let s = 0; s < samples; s++) {
    const base = s > 0 ? lists[nested ? s - 1 : Math.floor(r[3 * s] * s)] : [];
    const keep = Math.floor(r[3 * s + 1] * (base.length + 1));
    lists.push([...base.slice(0, keep), ...Array.from({ length: 1 + Math.floor(r[3 * s + 2] * grow) }, () => ++token)]);
  }
  return treeOf(lists);
}

const plain = (name: string, groups: number, t: number, rep: number, hd: number, queryOffset: number, qScale: number): AttentionCase => ({ name, groups, t, rep, hd, queryOffset, qScale, layout: null });
const tree = (name: string, groups: number, layout: TreeLayout, rep: number, hd: number, qScale: number, queryOffset = 0): AttentionCase => ({ name, groups, t: layout.parent.length, rep, hd, queryOffset, qScale, layout });

const GRPO_PROMPT = Array.from({ length: 70 }, (_, i) => 1000 + i);
const TRUNK = 37;
const chain = treeOf([Array.from({ length: 70 }, (_, i) => i)]);

/**
 * Causal: sequences that leave partial tiles, head dims 5 (rows as f32s) to 256 (the smallest tiles), grouped
 * queries (rep 1, 2, 3, 7), a long context, queries behind a trunk (queryOffset), scores large enough that the
 * running max must rescale. Trees (each position sees its ancestors): random branching trees, a forest of short
 * chains, a GRPO group (a prompt, 8 answers: whole key tiles of sibling branches skipped), a chain (must give plain
 * causal attention), a tree behind a trunk's chain (queryOffset), with the causal cases' head dims and reps.
 */
export const ATTENTION_CASES: AttentionCase[] = [
  plain('causal', 1, 7, 1, 8, 0, 0.5),
  plain('causal', 3, 65, 2, 16, 0, 0.3),
  plain('causal', 2, 33, 7, 64, 0, 0.15),
  plain('causal behind a 37-key trunk', 2, 100, 3, 16, 37, 0.3),
  plain('causal, one query position', 1, 20, 7, 8, 19, 0.5),
  plain('causal, odd head dim', 2, 70, 1, 5, 0, 0.5),
  plain('causal', 1, 50, 2, 128, 0, 0.1),
  plain('causal, the smallest tiles', 1, 21, 1, MAX_HEAD_DIM, 3, 0.07),
  plain('causal, scores up to ~±60: the running max rescales', 2, 40, 2, 16, 0, 4),
  plain('causal, long context: many key and row tiles', 1, 301, 2, 64, 0, 0.15),
  tree('tree', 1, randomTree(6, 8, 1), 1, 8, 0.5),
  tree('tree', 3, randomTree(12, 20, 2), 2, 16, 0.3),
  tree('tree', 2, randomTree(5, 12, 3), 7, 64, 0.15),
  tree('tree, odd head dim, scores up to ~±15', 2, randomTree(9, 15, 4), 2, 5, 3),
  tree('tree, branches nested deep', 1, randomTree(30, 5, 1, true), 3, 16, 0.3),
  tree('tree, a forest of short chains', 1, randomTree(40, 3, 5), 1, 8, 0.5),
  // Keys 0…64 a chain: the keys of tile 0 (64 at hd 16) end at 65, the second row workgroup's first position + 1, and
  // key workgroup 0's rows at 65, one row past its first row tile: each skip is one position from wrong.
  tree('tree, subtrees ending one past a workgroup edge', 1, treeOf([Array.from({ length: 65 }, (_, i) => i), Array.from({ length: 30 }, (_, i) => 100 + i), [200, 201]]), 1, 16, 0.3),
  tree('tree, a GRPO group (prompt, 8 answers)', 2, treeOf(Array.from({ length: 8 }, (_, b) => [...GRPO_PROMPT, ...Array.from({ length: 25 + 3 * b }, (_, i) => 100 * b + i)])), 2, 64, 0.15),
  { ...tree('a chain against plain causal attention', 2, chain, 2, 16, 0.3), reference: null },
  tree(`tree behind a ${TRUNK}-key trunk`, 2, behindTrunk(randomTree(10, 12, 6), TRUNK), 3, 16, 0.3, TRUNK),
  tree('tree, the smallest tiles', 1, randomTree(6, 10, 7), 1, MAX_HEAD_DIM, 0.07),
];

export const attentionCaseName = (c: AttentionCase) => `attention ${c.name}: G ${c.groups} T ${c.t} rep ${c.rep} hd ${c.hd} offset ${c.queryOffset} q ±${c.qScale}`;

/** q, k, v and a cotangent for y, from `seed`. */
export function attentionInputs(c: AttentionCase, seed: number): Inputs {
  const qShape = [c.groups, (c.t - c.queryOffset) * c.rep, c.hd];
  const kShape = [c.groups, c.t, c.hd];
  return [
    { data: randomArray(size(qShape), seed, c.qScale), shape: qShape },
    { data: randomArray(size(kShape), seed + 1), shape: kShape },
    { data: randomArray(size(kShape), seed + 2), shape: kShape },
    { data: randomArray(size(qShape), seed + 3), shape: qShape },
  ];
}

/** causalAttention under `layout` and its gradients for q, k, v under the cotangent r: [y, dq, dk, dv]. */
export const attentionWithGrads = (c: AttentionCase, layout = c.layout) => (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, r: tf.Tensor) => {
  const attend = (a: tf.Tensor, b: tf.Tensor, d: tf.Tensor) => causalAttention(a as tf.Tensor3D, b as tf.Tensor3D, d as tf.Tensor3D, undefined, layout, c.queryOffset);
  const grads = tf.grads((a: tf.Tensor, b: tf.Tensor, d: tf.Tensor) => tf.sum(tf.mul(attend(a, b, d), r)))([q, k, v]);
  return [attend(q, k, v), ...grads];
};

/** f32 sums in another order than the cpu's: y is an average of values in [−1, 1]. */
export const ATTENTION_FORWARD_TOL = { atol: 2e-6, rtol: 1e-5 };
/**
 * Gradients sum over up to T·rep rows with cancellation, so their error scales with the largest entry (as the matmul
 * gradient's check does): this fraction of it.
 */
export const ATTENTION_GRAD_FRACTION = 1e-5;

/**
 * One case: y, dq, dk and dv against the cpu's, and whether webgpu took the fused kernels (a forward for y, one for
 * the gradient's tape, a backward; under a tree all of them the tree's): ratio 0 if so, Infinity if not.
 */
export async function attentionCaseChecks(c: AttentionCase, seed: number): Promise<Check[]> {
  const inputs = attentionInputs(c, seed);
  const want = await runOn('cpu', inputs, attentionWithGrads(c, c.reference === undefined ? c.layout : c.reference));
  const before = { ...attentionStats };
  const got = await runOn('webgpu', inputs, attentionWithGrads(c));
  const ran = (['forward', 'backward', 'treeForward', 'treeBackward'] as const).map((k) => attentionStats[k] - before[k]);
  const wanted = c.layout ? [2, 1, 2, 1] : [2, 1, 0, 0];
  const name = attentionCaseName(c);
  return [
    { name: `${name}: fused dispatches (forward, backward, tree's) ${ran} of ${wanted}`, ratio: tf.util.arraysEqual(ran, wanted) ? 0 : Infinity },
    { name: `${name} y`, ratio: worstRatio(got[0], want[0], ATTENTION_FORWARD_TOL.atol, ATTENTION_FORWARD_TOL.rtol) },
    ...['dq', 'dk', 'dv'].map((g, j) => ({ name: `${name} ${g}`, ratio: worstRatio(got[j + 1], want[j + 1], ATTENTION_GRAD_FRACTION * maxAbs(want[j + 1]), 0) })),
  ];
}

/** Seed of the case at `index` (the tests replay a case by it). */
export const attentionSeed = (index: number) => 10 * index + 1;

export async function attentionChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, c] of ATTENTION_CASES.entries()) out.push(...(await attentionCaseChecks(c, attentionSeed(i))));
  return out;
}

/** Every check, for the device script; the reductions and precisions the device lacks are left out (and said so). */
export async function allKernelChecks(features: { shaderF16: boolean; subgroups: boolean }): Promise<{ checks: Check[]; notRun: string[] }> {
  const checks: Check[] = [];
  const notRun: string[] = [];
  checks.push(...(await matmulChecks('tiled-f32')), await matmulGradientCheck('tiled-f32'));
  if (features.shaderF16) checks.push(...(await matmulChecks('tiled-f16')), await matmulGradientCheck('tiled-f16'), ...(await mixedMatmulChecks(true)), ...(await mixedMatmulChecks(false)));
  else notRun.push('matmul tiled-f16 and mixed (no shader-f16)');
  if (features.subgroups) {
    const cases = [...matmulCases(), ...skinnyMatmulCases()];
    checks.push(...(await matmulChecks('subgroup-f32', cases)));
    if (features.shaderF16) checks.push(...(await matmulChecks('subgroup-f16', cases)));
    checks.push(...(await subgroupFewThreadsChecks()));
  } else notRun.push('matmul subgroup-f32 and subgroup-f16 (no subgroups)');
  checks.push(...(await matmulAddChecks('tiled-f32')), ...(await matmulAddChecks('tfjs')));
  if (features.shaderF16) checks.push(...(await matmulAddChecks('tiled-f16')), ...(await matmulAddChecks('tiled-f32', { mixed: true })));
  if (features.subgroups) checks.push(...(await matmulAddChecks('subgroup-f32')));
  setMatmulKernel('tiled-f32');
  checks.push(...(await rmsNormChecks('workgroup')));
  if (features.subgroups) checks.push(...(await rmsNormChecks('subgroups')));
  else notRun.push('rmsNorm subgroups (no subgroups)');
  checks.push(await rmsNormGradientCheck(), ...(await ropeChecks()), ...(await swigluChecks()), ...(await attentionChecks()), ...(await pagedChecks()), ...(await sampleChecks('workgroup')));
  if (features.subgroups) checks.push(...(await sampleChecks('subgroups')));
  else notRun.push('sample subgroups (no subgroups)');
  checks.push(...(await fusedChecks(features))); // fused norm/SwiGLU products (fused-checks.ts)
  if (!features.shaderF16) notRun.push('fused products with f16 weights (no shader-f16)');
  return { checks, notRun };
}
