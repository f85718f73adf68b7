/**
 * The shaders behind fused-norm-matmul.ts and fused-swiglu-matmul.ts: a product y = A' · B over rows of A [M, K]
 * (leading axes flattened) with up to two things folded in, so that the tensors between them are never written:
 * - RMSNorm, folded in: A' = A · rsqrt(mean(A²) + eps) · w_norm; the row's factor is constant along K, so the
 *   product is taken of A with B scaled by w_norm and scaled by the row's factor at the end, whose sum of squares
 *   is gathered from the tiles of A as they are staged (no pass over A of its own: see foldedNorm);
 * - an epilogue, SwiGLU: two products share A's tiles, gate = A'·B_g and up = A'·B_u, and each output is
 *   silu(gate) · up from the two accumulators (B_g and B_u may be column ranges of one [K, 2·I] weight, gate/up
 *   fused for decoding: each is read at a column offset with the weight's row stride).
 * Built on product-wgsl.ts's skeletons, as matmul.ts's products are: the tiled shader (64×64 outputs per workgroup,
 * 4×4 per thread) and, for at most SKINNY_MAX_ROWS rows (a decode step), the skinny one (a column per thread, K in
 * four slices, B read once for every row). A, the tiles and the sums are f32; the weights are read from their f16
 * copies where the plain product's kernel would read them so (a 'tiled-f16' or 'subgroup-f16' choice). Mixed
 * precision's f16 products keep the unfused path (see fusedKernelPays).
 *
 * Whether the fused kernels run is a choice per op and per use (decode, prefill, training), measured on the model's
 * shapes by fused-calibration.ts (AGENTJET_WEBGPU_FUSED or setFusedKernels forces it); until measured they do not.
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, dispatch, MAX_WORKGROUPS_PER_DIMENSION, ourKernelRuns, type WebGpuBackend } from './gpu.ts';
import { f16MatmulsActive, f16WeightFor } from './matmul.ts';
import { type ProductShader, SKINNY_COLS, SKINNY_K_BLOCK, SKINNY_MAX_ROWS, SKINNY_THREADS, skinnyProductWgsl, TILE, TILE_K, TILE_THREADS, tiledProductWgsl } from './product-wgsl.ts';

export const NORM_MATMUL_KERNEL = 'AgentJetNormMatmul';
export const SWIGLU_MATMUL_KERNEL = 'AgentJetSwigluMatmul';

// The tiling is product-wgsl.ts's (64×64 outputs per workgroup of 16×16 threads, a K step of 16; skinny: 64
// columns, 4 K slices, 64 K positions staged). With the norm and a second B tile the tiled shader stages A 64×16 + two
// B tiles 16×64 + the norm's 64×4 + 64 floats = 13.3 KiB of workgroup memory, under WebGPU's 16 KiB minimum.
/** Threads a row's squares are shared among in the tiled shader: 16×16 threads over 64 rows, 4 of a K step's 16 each. */
const NORM_LANES = (TILE_THREADS * TILE_THREADS) / TILE;
/** The same in the skinny shader: 256 threads over at most SKINNY_MAX_ROWS (8) rows, 2 of a block's 64 each. */
const SKINNY_NORM_LANES = SKINNY_THREADS / SKINNY_MAX_ROWS;

export class FusedMatmulShapeError extends Error {
  override name = 'FusedMatmulShapeError';
}

export class UnknownFusedModeError extends Error {
  override name = 'UnknownFusedModeError';
}

// ---------------------------------------------------------------------------------------------------------------
// The choice: per op and per use, measured (fused-calibration.ts) or forced

export type FusedOp = 'normMatmul' | 'swigluMatmul';
/** A product's use: a decode step (≤ SKINNY_MAX_ROWS rows), a prefill's forward, or a training forward (its backward recomputes). */
export type FusedUse = 'decode' | 'prefill' | 'train';
export const FUSED_OPS: readonly FusedOp[] = ['normMatmul', 'swigluMatmul'];
export const FUSED_USES: readonly FusedUse[] = ['decode', 'prefill', 'train'];

/** 'auto': as measured (unfused until then); 'on'/'off': forced (the device script compares both). */
export type FusedMode = 'auto' | 'on' | 'off';
export const FUSED_MODES: readonly FusedMode[] = ['auto', 'on', 'off'];

let mode: FusedMode = 'auto';
const measured: Record<FusedOp, Record<FusedUse, boolean>> = {
  normMatmul: { decode: false, prefill: false, train: false },
  swigluMatmul: { decode: false, prefill: false, train: false },
};

/** Fused dispatches per op since the thread started, and those that read f16 weights (tests check which path ran). */
export const fusedStats = { normMatmul: 0, swigluMatmul: 0, f16Weights: 0 };

export function setFusedKernels(m: FusedMode): void {
  if (!FUSED_MODES.includes(m)) throw new UnknownFusedModeError(`unknown fused-kernel mode "${m}" (one of ${FUSED_MODES.join(', ')})`);
  mode = m;
}

export function fusedKernelsMode(): FusedMode {
  return mode;
}

/** Record a measured choice (fused-calibration.ts). */
export function setMeasuredChoice(op: FusedOp, use: FusedUse, fused: boolean): void {
  measured[op][use] = fused;
}

/** The use of a product over `rows` rows recorded now: under a gradient tape it is training's. */
export function useOf(rows: number): FusedUse {
  if (tf.engine().isTapeOn()) return 'train';
  return rows <= SKINNY_MAX_ROWS ? 'decode' : 'prefill';
}

const KERNEL_OF: Record<FusedOp, string> = { normMatmul: NORM_MATMUL_KERNEL, swigluMatmul: SWIGLU_MATMUL_KERNEL };

/**
 * Whether `op` runs fused for a product over `rows` rows recorded now: on webgpu with the kernel registered, outside
 * mixed precision's f16 products (these kernels are f32), in a grid the tiled shader covers, and as chosen.
 */
export function fusedKernelPays(op: FusedOp, rows: number): boolean {
  if (mode === 'off' || !ourKernelRuns(KERNEL_OF[op]) || f16MatmulsActive()) return false;
  if (Math.ceil(rows / TILE) > MAX_WORKGROUPS_PER_DIMENSION) return false;
  return mode === 'on' || measured[op][useOf(rows)];
}

// ---------------------------------------------------------------------------------------------------------------
// WGSL

interface Variant {
  norm: boolean;
  swiglu: boolean;
  /** The weights are bound as their f16 copies (matmul.ts f16WeightFor); A, the tiles and the sums stay f32. */
  bHalf: boolean;
  /** A bias per output column is added in the stores (decoding's qkv). */
  bias: boolean;
}

/** Storage bindings after the output (0), in order; the uniform block follows them. */
const inputNames = (v: Variant) => ['a', ...(v.norm ? ['wn'] : []), 'bg', ...(v.swiglu ? ['bu'] : []), ...(v.bias ? ['bias'] : [])];

function header(v: Variant): string {
  const names = inputNames(v);
  const type = (name: string) => (v.bHalf && (name === 'bg' || name === 'bu') ? 'f16' : 'f32');
  return `${v.bHalf ? 'enable f16;\n' : ''}struct U { m : i32, n : i32, k : i32, ldb : i32, gOff : i32, uOff : i32, eps : f32, pad0 : i32, };
@group(0) @binding(0) var<storage, read_write> c : array<f32>;
${names.map((name, i) => `@group(0) @binding(${i + 1}) var<storage, read> ${name} : array<${type(name)}>;`).join('\n')}
@group(0) @binding(${names.length + 1}) var<uniform> u : U;`;
}

/** silu(g) · up, as swiglu.ts: 1 / (1 + e^−g) is 0 where e^−g overflows (g < −88), the limit. */
const SILU_TIMES = (g: string, up: string) => `${g} / (1.0 + exp(-${g})) * ${up}`;

/**
 * The norm without a pass of its own: inv(r) = rsqrt(mean(A[r]²) + eps) is constant along K, so
 * Σ_k A[r,k]·inv(r)·w[k]·B[k,c] = inv(r) · Σ_k A[r,k]·(w[k]·B[k,c]). A is staged as it is, B scaled by the norm
 * weight as it is read; each thread adds the squares of its share of the staged A to `ss` (`lanes` threads a row,
 * `thread` its index in the workgroup), the block's rows' sums meet in workgroup memory after the K loop, and each
 * output is scaled by its row's inv.
 */
function foldedNorm(rows: number, lanes: number, stagedK: number, thread: string): Pick<ProductShader, 'workgroupMemory' | 'prologue' | 'afterStaging' | 'beforeStores'> {
  const share = stagedK / lanes;
  return {
    workgroupMemory: `var<workgroup> sq : array<array<f32, ${lanes}>, ${rows}>;\nvar<workgroup> invs : array<f32, ${rows}>;`,
    prologue: `let nr = ${thread} / ${lanes};
  let lane = ${thread} % ${lanes};
  var ss = 0.0;`,
    afterStaging: `if (nr < ${rows}) { for (var j = 0; j < ${share}; j++) { let x = As[nr][lane * ${share} + j]; ss = fma(x, x, ss); } }`,
    beforeStores: `if (nr < ${rows}) { sq[nr][lane] = ss; }
  workgroupBarrier();
  if (lane == 0 && nr < ${rows}) {
    var total = 0.0;
    for (var j = 0; j < ${lanes}; j++) { total += sq[nr][j]; }
    invs[nr] = inverseSqrt(total / f32(u.k) + u.eps);
  }
  workgroupBarrier();`,
  };
}

/** The fused product in the skeletons' terms; `norm` folds the RMSNorm in (foldedNorm's arguments). */
function fusedProduct(v: Variant, norm: Parameters<typeof foldedNorm>): ProductShader {
  const weight = (name: string, offset: string) => `f32(${name}[kk * u.ldb + ${offset} + col])${v.norm ? ' * wn[kk]' : ''}`;
  const scaled = (sum: string) => (v.norm ? `invs[r] * ${sum}` : sum);
  return {
    header: header(v),
    ...(v.norm ? foldedNorm(...norm) : {}),
    readA: 'a[row * u.k + kk]',
    readB: [weight('bg', 'u.gOff'), ...(v.swiglu ? [weight('bu', 'u.uOff')] : [])],
    output: (sums) => `${v.swiglu ? SILU_TIMES(`(${scaled(sums[0])})`, `(${scaled(sums[1])})`) : scaled(sums[0])}${v.bias ? ' + bias[col]' : ''}`,
    outputIndex: 'row * u.n + col',
  };
}

const tiledWgsl = (v: Variant) => tiledProductWgsl(fusedProduct(v, [TILE, NORM_LANES, TILE_K, 'flat']));
const skinnyWgsl = (v: Variant, rows: number) => skinnyProductWgsl(fusedProduct(v, [rows, SKINNY_NORM_LANES, SKINNY_K_BLOCK, 't']), rows);

// ---------------------------------------------------------------------------------------------------------------
// The dispatch

export interface FusedProduct {
  /** Rows [..., K]. */
  x: tf.TensorInfo;
  /** The RMSNorm's weight [K], or null (no prologue). */
  normWeight: tf.TensorInfo | null;
  eps: number;
  /** The weight read for the product (gate's with SwiGLU), [K, ldb]. */
  b: tf.TensorInfo;
  /** With SwiGLU, up's weight (may be `b` itself: gate and up as column ranges of one weight). */
  up: tf.TensorInfo | null;
  /** A bias [n] added to each output row, or null. */
  bias: tf.TensorInfo | null;
  /** Output columns; each weight's columns start at its offset. */
  n: number;
  gateOffset: number;
  upOffset: number;
}

/** One dispatch: A' · B, or silu(A'·B_g) · (A'·B_u); A' = A normalised when a norm weight is given. Output [..., n]. */
export function runFusedMatmul(gpu: WebGpuBackend, p: FusedProduct): tf.TensorInfo {
  const k = p.x.shape[p.x.shape.length - 1];
  const m = tf.util.sizeFromShape(p.x.shape) / k;
  const ldb = p.b.shape[1];
  const dtypes = [p.x, p.b, ...(p.up ? [p.up] : []), ...(p.normWeight ? [p.normWeight] : []), ...(p.bias ? [p.bias] : [])].map((t) => t.dtype);
  if (dtypes.some((d) => d !== 'float32')) throw new FusedMatmulShapeError(`float32 operands only, not ${dtypes.join(', ')}`);
  if (p.b.shape.length !== 2 || p.b.shape[0] !== k || (p.up && !tf.util.arraysEqual(p.up.shape, p.b.shape))) throw new FusedMatmulShapeError(`rows [${p.x.shape}] against weights [${p.b.shape}]${p.up ? ` and [${p.up.shape}]` : ''}`);
  if (p.gateOffset + p.n > ldb || p.upOffset + p.n > ldb) throw new FusedMatmulShapeError(`${p.n} columns from offsets ${p.gateOffset}, ${p.upOffset} exceed the weight's ${ldb}`);
  if (p.normWeight && !tf.util.arraysEqual(p.normWeight.shape, [k])) throw new FusedMatmulShapeError(`norm weight [${p.normWeight.shape}] for rows of ${k}`);
  if (p.bias && !tf.util.arraysEqual(p.bias.shape, [p.n])) throw new FusedMatmulShapeError(`bias [${p.bias.shape}] for ${p.n} columns`);
  const skinny = m <= SKINNY_MAX_ROWS && Math.ceil(p.n / SKINNY_COLS) <= MAX_WORKGROUPS_PER_DIMENSION;
  // The weights as the plain product of this kind reads them: their f16 copies where its kernel is an f16 one.
  const gate = f16WeightFor(gpu, p.b, skinny ? 'skinny' : 'tiled');
  const up = gate && p.up ? f16WeightFor(gpu, p.up, skinny ? 'skinny' : 'tiled') : p.up;
  const v: Variant = { norm: p.normWeight !== null, swiglu: p.up !== null, bHalf: gate !== null, bias: p.bias !== null };
  const tag = `${v.norm ? 'norm' : ''}${v.swiglu ? 'swiglu' : ''}${v.bHalf ? '-f16' : ''}${v.bias ? '-bias' : ''}`;
  const inputs = [p.x, ...(p.normWeight ? [p.normWeight] : []), gate ?? p.b, ...(up ? [up] : []), ...(p.bias ? [p.bias] : [])];
  if (v.bHalf) fusedStats.f16Weights++;
  const uniforms = [{ i32: m }, { i32: p.n }, { i32: k }, { i32: ldb }, { i32: p.gateOffset }, { i32: p.upOffset }, { f32: p.eps }];
  const outShape = [...p.x.shape.slice(0, -1), p.n];
  return skinny
    ? dispatch(gpu, {
        key: `fused-skinny-${tag}-${m}`,
        wgsl: () => skinnyWgsl(v, m),
        name: 'FusedMatMulSkinny',
        inputs,
        output: { shape: outShape },
        uniforms,
        workgroups: [Math.ceil(p.n / SKINNY_COLS), 1, 1],
      })
    : dispatch(gpu, {
        key: `fused-tiled-${tag}`,
        wgsl: () => tiledWgsl(v),
        name: 'FusedMatMulTiled',
        inputs,
        output: { shape: outShape },
        uniforms,
        workgroups: [Math.ceil(p.n / TILE), Math.ceil(m / TILE), 1],
      });
}

/** The kernels' attrs: the norm's eps and the columns each weight is read from. */
interface FusedAttrs {
  eps: number;
  n: number;
  gateOffset: number;
  upOffset: number;
}

/**
 * Register both kernels, inputs {x, normWeight?, b, up?, bias?}: A'·B (+ bias), and with `up`
 * silu(A'·B)·(A'·up) (B the gate's weight; `up` may be B itself, read at the attrs' column offsets).
 */
export function registerFusedMatmuls(): void {
  for (const op of FUSED_OPS) {
    tf.registerKernel({
      kernelName: KERNEL_OF[op],
      backendName: 'webgpu',
      kernelFunc: ({ inputs, backend, attrs }) => {
        const a = attrs as unknown as FusedAttrs;
        const given = (name: string) => (inputs[name] as tf.TensorInfo | undefined) ?? null;
        fusedStats[op]++;
        return runFusedMatmul(asWebGpu(backend), { x: inputs.x as tf.TensorInfo, normWeight: given('normWeight'), eps: a.eps, b: inputs.b as tf.TensorInfo, up: given('up'), bias: given('bias'), n: a.n, gateOffset: a.gateOffset, upOffset: a.upOffset });
      },
    });
  }
}
