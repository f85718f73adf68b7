/**
 * Checks of the fused kernels (fused-norm-matmul.ts, fused-swiglu-matmul.ts) against the unfused compositions on the
 * cpu backend, as data for their test and the device script (checks.ts allKernelChecks): forward and gradient on
 * decode-shaped rows (1…SKINNY_MAX_ROWS: the skinny shader) and training-shaped ones (no size a multiple of a tile),
 * batched rows, separate gate/up weights and decoding's joint one, with and without the RMSNorm; then the tiny model's
 * logits and gradients with the fused kernels forced on against forced off and against the cpu.
 */
import * as tf from '@tensorflow/tfjs';
import { forward, initWeights, rmsNorm as modelRmsNorm, toParams, fuseWeights } from '../../model.ts';
import { tinyConfig } from '../../testing/configs.ts';
import { type FusedMode, fusedKernelsMode, fusedStats, setFusedKernels } from '../fused-matmul.ts';
import { matmulKernel, setMatmulKernel } from '../matmul.ts';
import { normMatmul } from '../fused-norm-matmul.ts';
import { type GatedWeights, swigluMatmul } from '../fused-swiglu-matmul.ts';
import { SKINNY_MAX_ROWS } from '../product-wgsl.ts';
import { swigluReference } from '../swiglu.ts';
import type { Check } from './checks.ts';
import { randomArray, runOn, worstRatio } from './gpu.ts';

type Inputs = { data: Float32Array; shape: number[] }[];

const EPS = 1e-6;
const size = (shape: number[]) => shape.reduce((p, d) => p * d, 1);
const maxAbs = (x: Float32Array) => x.reduce((a, b) => Math.max(a, Math.abs(b)), 0);

/**
 * Errors as a fraction of the reference's largest entry: f32 sums of K products in another order than the cpu's, and
 * for SwiGLU a product of two such sums (lavapipe: ≤ 5e-7 norm·matmul, ≤ 9e-7 swiglu·matmul, gradients and the
 * model's); 1e-5 leaves room for a GPU's fma and summation order, while a norm weight off by 1e-4 already fails it.
 */
export const FUSED_FRACTION = 1e-5;

/** Rows [..., K] and output columns: rows 1…8 (skinny), odd training shapes (tiled), batched rows of both kinds. */
export const FUSED_SHAPES: [number[], number][] = [
  [[1, 7], 13],
  [[2, 65], 17],
  [[3, 130], 70],
  [[4, 33], 129],
  [[5, 96], 1],
  [[6, 17], 300],
  [[7, 200], 33],
  [[SKINNY_MAX_ROWS, 64], 64],
  [[SKINNY_MAX_ROWS + 1, 17], 200],
  [[33, 65], 17],
  [[65, 129], 63],
  [[130, 260], 97],
  [[3, 11, 65], 40],
  [[2, 4, 1, 33], 19],
];

const caseName = (xShape: number[], n: number) => `x[${xShape}] → ${n}`;

/** Worst error of each output over FUSED_FRACTION of its reference's largest entry. */
function fractionRatio(got: Float32Array[], want: Float32Array[]): number {
  return Math.max(...got.map((g, i) => worstRatio(g, want[i], FUSED_FRACTION * Math.max(maxAbs(want[i]), 1e-30), 0)));
}

/** rmsNorm then the product, on any backend (the cpu reference): x [..., K] · w [K, N] → [..., N]. */
const normThenMatmul = (x: tf.Tensor, nw: tf.Tensor, w: tf.Tensor) => {
  const [k, n] = w.shape;
  return tf.reshape(tf.matMul(tf.reshape(modelRmsNorm(x, nw, EPS), [-1, k]) as tf.Tensor2D, w as tf.Tensor2D), [...x.shape.slice(0, -1), n]);
};

/** The fused op on normThenMatmul's inputs. */
const fusedNormMatmul = (x: tf.Tensor, nw: tf.Tensor, w: tf.Tensor) => normMatmul(x, nw as tf.Tensor1D, EPS, w as tf.Tensor2D);

/** normThenMatmul's inputs: rows x, a norm weight [K] and a weight [K, n], each from its own seed. */
function normInputs(xShape: number[], n: number, [xSeed, nwSeed, wSeed]: [number, number, number]): Inputs {
  const k = xShape[xShape.length - 1];
  return [
    { data: randomArray(size(xShape), xSeed, 2), shape: xShape },
    { data: randomArray(k, nwSeed, 1.5), shape: [k] },
    { data: randomArray(k * n, wSeed), shape: [k, n] },
  ];
}

/** The SwiGLU variants: gate/up as two weights or one, the norm applied or not. */
interface GatedVariant {
  joint: boolean;
  norm: boolean;
}
const GATED_VARIANTS: GatedVariant[] = [
  { joint: false, norm: true },
  { joint: true, norm: true },
  { joint: false, norm: false },
  { joint: true, norm: false },
];
const variantName = (v: GatedVariant) => `${v.joint ? 'gate/up joint' : 'gate, up'}${v.norm ? ', normed' : ''}`;

/** The cpu composition: (norm) then the two products then silu(g)·u. Inputs x, [nw], weights. */
const gatedReference = (v: GatedVariant, n: number) => (...ins: tf.Tensor[]) => {
  const [x, ...rest] = ins;
  const nw = v.norm ? rest.shift()! : null;
  const k = x.shape[x.shape.length - 1];
  const xn = tf.reshape(nw ? modelRmsNorm(x, nw, EPS) : x, [-1, k]) as tf.Tensor2D;
  let g: tf.Tensor;
  let u: tf.Tensor;
  if (v.joint) {
    const gu = tf.matMul(xn, rest[0] as tf.Tensor2D);
    [g, u] = [tf.slice(gu, [0, 0], [-1, n]), tf.slice(gu, [0, n], [-1, n])];
  } else {
    [g, u] = [tf.matMul(xn, rest[0] as tf.Tensor2D), tf.matMul(xn, rest[1] as tf.Tensor2D)];
  }
  return tf.reshape(swigluReference(g, u), [...x.shape.slice(0, -1), n]);
};

/** The fused op on the same inputs. */
const gatedFused = (v: GatedVariant) => (...ins: tf.Tensor[]) => {
  const [x, ...rest] = ins;
  const nw = v.norm ? (rest.shift() as tf.Tensor1D) : null;
  const weights: GatedWeights = v.joint ? { gateUp: rest[0] as tf.Tensor2D } : { gate: rest[0] as tf.Tensor2D, up: rest[1] as tf.Tensor2D };
  return swigluMatmul(x, weights, nw ? { weight: nw, eps: EPS } : null);
};

function gatedInputs(v: GatedVariant, xShape: number[], n: number, seed: number): Inputs {
  const k = xShape[xShape.length - 1];
  return [
    { data: randomArray(size(xShape), seed, 2), shape: xShape },
    ...(v.norm ? [{ data: randomArray(k, seed + 1, 1.5), shape: [k] }] : []),
    ...(v.joint ? [{ data: randomArray(k * 2 * n, seed + 2), shape: [k, 2 * n] }] : [{ data: randomArray(k * n, seed + 2), shape: [k, n] }, { data: randomArray(k * n, seed + 3), shape: [k, n] }]),
  ];
}

/** `f`'s gradients for every input under a random cotangent of its output shape (appended as the last input). */
const withGrads = (f: (...xs: tf.Tensor[]) => tf.Tensor) => (...ins: tf.Tensor[]) => {
  const r = ins.pop()!;
  return tf.grads((...xs: tf.Tensor[]) => tf.sum(tf.mul(f(...xs), r)))(ins);
};

/** Whether `ran` fused dispatches of `op` happened during `f` (a Check: 0 if `wanted`, Infinity if not). */
async function counted<T>(name: string, op: keyof typeof fusedStats, wanted: number, f: () => Promise<T>): Promise<{ value: T; check: Check }> {
  const before = fusedStats[op];
  const value = await f();
  const ran = fusedStats[op] - before;
  return { value, check: { name: `${name}: ${ran} fused dispatches of ${wanted}`, ratio: ran === wanted ? 0 : Infinity } };
}

export async function normMatmulChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, [xShape, n]] of FUSED_SHAPES.entries()) {
    const inputs = normInputs(xShape, n, [200 + i, 300 + i, 400 + i]);
    const want = await runOn('cpu', inputs, normThenMatmul);
    const name = `normMatmul ${caseName(xShape, n)}`;
    const { value: got, check } = await counted(name, 'normMatmul', 1, () => runOn('webgpu', inputs, fusedNormMatmul));
    out.push(check, { name, ratio: fractionRatio(got, want) });
  }
  return out;
}

/** norm·matmul with a bias in its stores (decoding's qkv), forward and gradients (the bias's too), against the cpu. */
export async function normMatmulBiasChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, [xShape, n]] of [FUSED_SHAPES[0], FUSED_SHAPES[3], FUSED_SHAPES[10]].entries()) {
    const k = xShape[xShape.length - 1];
    const rows = size(xShape) / k;
    const inputs = [...normInputs(xShape, n, [1300 + i, 1310 + i, 1320 + i]), { data: randomArray(n, 1330 + i, 3), shape: [n] }];
    const reference = (x: tf.Tensor, nw: tf.Tensor, w: tf.Tensor, b: tf.Tensor) => tf.add(normThenMatmul(x, nw, w), b);
    const fused = (x: tf.Tensor, nw: tf.Tensor, w: tf.Tensor, b: tf.Tensor) => normMatmul(x, nw as tf.Tensor1D, EPS, w as tf.Tensor2D, b as tf.Tensor1D);
    const withCotangent = [...inputs, { data: randomArray(rows * n, 1340 + i), shape: [...xShape.slice(0, -1), n] }];
    // The cpu's first: the checks leave webgpu active.
    const [want, wantG] = [await runOn('cpu', inputs, reference), await runOn('cpu', withCotangent, withGrads(reference))];
    const name = `normMatmul + bias ${caseName(xShape, n)}`;
    const { value: got, check } = await counted(name, 'normMatmul', 1, () => runOn('webgpu', inputs, fused));
    const gotG = await runOn('webgpu', withCotangent, withGrads(fused));
    out.push(check, { name, ratio: fractionRatio(got, want) }, { name: `${name} gradients (x, norm weight, w, bias)`, ratio: fractionRatio(gotG, wantG) });
  }
  return out;
}

export async function swigluMatmulChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, [xShape, n]] of FUSED_SHAPES.entries()) {
    for (const [j, v] of GATED_VARIANTS.entries()) {
      if (j >= 2 && i % 3 !== 0) continue; // without the norm: every third shape (the norm's absence is one branch)
      const inputs = gatedInputs(v, xShape, n, 500 + 10 * i + j);
      const want = await runOn('cpu', inputs, gatedReference(v, n));
      const name = `swigluMatmul ${variantName(v)} ${caseName(xShape, n)}`;
      const { value: got, check } = await counted(name, 'swigluMatmul', 1, () => runOn('webgpu', inputs, gatedFused(v)));
      out.push(check, { name, ratio: fractionRatio(got, want) });
    }
  }
  return out;
}

/** Shapes whose gradients are checked: decode-sized, training-sized and batched rows. */
const GRADIENT_SHAPES: [number[], number][] = [
  [[3, 130], 70],
  [[33, 65], 17],
  [[65, 129], 63],
  [[3, 11, 65], 40],
];

export async function fusedGradientChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, [xShape, n]] of GRADIENT_SHAPES.entries()) {
    const k = xShape[xShape.length - 1];
    const cotangent = (cols: number, seed: number) => ({ data: randomArray(size(xShape) / k * cols, seed), shape: [...xShape.slice(0, -1), cols] });
    const inputs = [...normInputs(xShape, n, [600 + i, 610 + i, 620 + i]), cotangent(n, 630 + i)];
    const want = await runOn('cpu', inputs, withGrads(normThenMatmul));
    const got = await runOn('webgpu', inputs, withGrads(fusedNormMatmul));
    out.push({ name: `normMatmul gradient (x, norm weight, w) ${caseName(xShape, n)}`, ratio: fractionRatio(got, want) });
    for (const v of GATED_VARIANTS) {
      const inputs = [...gatedInputs(v, xShape, n, 700 + 10 * i), cotangent(n, 790 + i)];
      const wantG = await runOn('cpu', inputs, withGrads(gatedReference(v, n)));
      const gotG = await runOn('webgpu', inputs, withGrads(gatedFused(v)));
      out.push({ name: `swigluMatmul gradient ${variantName(v)} ${caseName(xShape, n)}`, ratio: fractionRatio(gotG, wantG) });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// f16 weights: where the matmul kernel is an f16 one, the fused products read the weights' f16 copies

/**
 * Errors of f16 weights as a fraction of the reference's largest entry: each weight rounded to 11 bits (relative
 * 2⁻¹¹), summed over K in f32, as matmulGradientCheck's 'tiled-f16' fraction.
 */
export const FUSED_F16_FRACTION = 2e-3;

/** Decode-shaped rows (the skinny shader) and training-shaped ones (the tiled shader). */
const F16_SHAPES: [number[], number][] = [
  [[1, 130], 70],
  [[SKINNY_MAX_ROWS, 64], 129],
  [[33, 65], 17],
  [[2, 40, 96], 63],
];

/**
 * Under the 'tiled-f16' matmul kernel, norm·matmul and swiglu·matmul (gate/up joint and separate) read f16 weights:
 * each dispatch says so, the result is within f16's rounding of the cpu's f32 one and outside f32's (the weights
 * really were rounded), and on decode rows it is the unfused products' (which read the same copies and keep A f32)
 * to f32 summation order.
 */
export async function fusedF16WeightChecks(): Promise<Check[]> {
  const kernelBefore = matmulKernel();
  const modeBefore = fusedKernelsMode();
  const out: Check[] = [];
  try {
    setMatmulKernel('tiled-f16');
    for (const [i, [xShape, n]] of F16_SHAPES.entries()) {
      const decode = size(xShape) / xShape[xShape.length - 1] <= SKINNY_MAX_ROWS;
      const sites: { name: string; inputs: Inputs; reference: (...xs: tf.Tensor[]) => tf.Tensor; fused: (...xs: tf.Tensor[]) => tf.Tensor }[] = [
        {
          name: `normMatmul f16 weights ${caseName(xShape, n)}`,
          inputs: normInputs(xShape, n, [1000 + i, 1010 + i, 1020 + i]),
          reference: normThenMatmul,
          fused: fusedNormMatmul,
        },
        ...[GATED_VARIANTS[0], GATED_VARIANTS[1]].map((v, j) => ({
          name: `swigluMatmul f16 weights ${variantName(v)} ${caseName(xShape, n)}`,
          inputs: gatedInputs(v, xShape, n, 1100 + 10 * i + j),
          reference: gatedReference(v, n),
          fused: gatedFused(v),
        })),
      ];
      for (const site of sites) {
        const want = await runOn('cpu', site.inputs, site.reference);
        setFusedKernels('on');
        const { value: got, check } = await counted(site.name, 'f16Weights', 1, () => runOn('webgpu', site.inputs, site.fused));
        const f16Ratio = Math.max(...got.map((g, o) => worstRatio(g, want[o], FUSED_F16_FRACTION * maxAbs(want[o]), 0)));
        out.push(check, { name: site.name, ratio: f16Ratio }, { name: `${site.name}: rounded (off f32's by more than f32's tolerance)`, ratio: fractionRatio(got, want) > 1 ? 0 : Infinity });
        if (!decode) continue;
        setFusedKernels('off');
        const unfused = await runOn('webgpu', site.inputs, site.fused);
        out.push({ name: `${site.name}: as the unfused f16 products`, ratio: fractionRatio(got, unfused) });
      }
    }
  } finally {
    setMatmulKernel(kernelBefore);
    setFusedKernels(modeBefore);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// The model: fused forced on against forced off and the cpu

/**
 * The tiny Qwen3-style model (q/k norms) with norm weights away from 1 (so that a norm weight left out shows): its
 * logits for padded rows [B, T] (B·T rows: ≤ SKINNY_MAX_ROWS is a decode step's use, more a prefill's), and with a
 * cotangent the gradients of every parameter (training's use).
 */
function modelRun(b: number, t: number, grads: boolean) {
  const cfg = tinyConfig();
  const named = initWeights(cfg, 11);
  for (const [name, w] of Object.entries(named)) if (name.includes('norm')) w.data = randomArray(w.data.length, 900 + name.length).map((x) => 1 + 0.5 * x);
  const ids = Int32Array.from({ length: b * t }, (_, i) => (i * 7 + 3) % cfg.vocab_size);
  const r = randomArray(b * t * cfg.vocab_size, 5);
  const layers = cfg.num_hidden_layers;
  const run = () =>
    tf.tidy(() => {
      const params = toParams(named);
      const names = Object.keys(params);
      const logitsOf = (...xs: tf.Tensor[]) => forward(cfg, fuseWeights(cfg, Object.fromEntries(names.map((n, i) => [n, xs[i]]))), ids, b, t);
      const xs = names.map((n) => params[n]);
      if (!grads) return [logitsOf(...xs)];
      const cot = tf.tensor2d(r, [b * t, cfg.vocab_size]);
      return tf.grads((...ps: tf.Tensor[]) => tf.sum(tf.mul(logitsOf(...ps), cot)))(xs);
    });
  // Per layer, fused: q, k and v each take the input norm; gate/up the post norm.
  return { run, wanted: { normMatmul: 3 * layers, swigluMatmul: layers } };
}

export async function fusedModelChecks(): Promise<Check[]> {
  const before: FusedMode = fusedKernelsMode();
  const out: Check[] = [];
  try {
    for (const [b, t, grads] of [
      [3, 1, false],
      [2, 9, false],
      [2, 9, true],
    ] as [number, number, boolean][]) {
      const { run, wanted } = modelRun(b, t, grads);
      const what = `tiny model ${grads ? 'gradients' : 'logits'} [${b}, ${t}]`;
      const want = await runOn('cpu', [], run);
      const dispatches = async (m: FusedMode) => {
        setFusedKernels(m);
        const start = { ...fusedStats };
        const value = await runOn('webgpu', [], run);
        const ran = [fusedStats.normMatmul - start.normMatmul, fusedStats.swigluMatmul - start.swigluMatmul];
        const expected = m === 'on' ? [wanted.normMatmul, wanted.swigluMatmul] : [0, 0];
        return { value, check: { name: `${what} fused ${m}: fused dispatches (norm·matmul, swiglu·matmul) ${ran} of ${expected}`, ratio: tf.util.arraysEqual(ran, expected) ? 0 : Infinity } };
      };
      const { value: unfused, check: none } = await dispatches('off');
      const { value: fused, check: all } = await dispatches('on');
      out.push(none, all);
      out.push({ name: `${what}: fused on vs fused off`, ratio: fractionRatio(fused, unfused) }, { name: `${what}: fused on vs the cpu`, ratio: fractionRatio(fused, want) });
    }
  } finally {
    setFusedKernels(before);
  }
  return out;
}

/** Every fused check (the device script's and the test's); the f16 weights' where the device has shader-f16. */
export async function fusedChecks(features: { shaderF16: boolean }): Promise<Check[]> {
  const f16 = features.shaderF16 ? await fusedF16WeightChecks() : [];
  return [...(await normMatmulChecks()), ...(await normMatmulBiasChecks()), ...(await swigluMatmulChecks()), ...(await fusedGradientChecks()), ...(await fusedModelChecks()), ...f16];
}
