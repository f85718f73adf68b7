/**
 * The shaders behind fused-norm-matmul.ts and fused-swiglu-matmul.ts: a product y = A' · B over rows of A [M, K]
 * (leading axes flattened) with up to two things folded in, so that the tensors between them are never written:
 * - a prologue, RMSNorm: each workgroup first reduces the squares of its own rows of A (a pre-pass over the rows its
 *   tile stages anyway) and stages A' = A · rsqrt(mean(A²) + eps) · w_norm into its tiles;
 * - an epilogue, SwiGLU: two products share A's tiles, gate = A'·B_g and up = A'·B_u, and each output is
 *   silu(gate) · up from the two accumulators (B_g and B_u may be column ranges of one [K, 2·I] weight, gate/up
 *   fused for decoding: each is read at a column offset with the weight's row stride).
 * Two shapes of work, as in matmul.ts: the tiled shader (64×64 outputs per workgroup, 4×4 per thread) and, for at
 * most SKINNY_MAX_ROWS rows (a decode step), a skinny one (a column per thread, K in four slices, B read once for
 * every row). f32 only: mixed precision's f16 products keep the unfused path (see fusedKernelPays).
 *
 * Whether the fused kernels run is a choice per op and per use (decode, prefill, training), measured on the model's
 * shapes by fused-calibration.ts (AGENTJET_WEBGPU_FUSED or setFusedKernels forces it); until measured they do not.
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, dispatch, MAX_WORKGROUPS_PER_DIMENSION, ourKernelRuns, type WebGpuBackend } from './gpu.ts';
import { f16MatmulsActive, PER_THREAD, SKINNY_COLS, SKINNY_K_BLOCK, SKINNY_MAX_ROWS, SKINNY_SLICES, TILE, TILE_K, TILE_THREADS } from './matmul.ts';

export const NORM_MATMUL_KERNEL = 'AgentJetNormMatmul';
export const SWIGLU_MATMUL_KERNEL = 'AgentJetSwigluMatmul';

// The tiling is matmul.ts's (64×64 outputs per workgroup of 16×16 threads, a K step of 16; skinny: 64 columns, 4
// K slices, 64 K positions staged). With the norm and a second B tile the tiled shader stages A 64×16 + two B tiles
// 16×64 + the norm's 64×4 + 64 floats = 13.3 KiB of workgroup memory, under WebGPU's 16 KiB minimum.
/** Threads per row in the tiled norm pre-pass: 16×16 threads over 64 rows. */
const NORM_LANES = (TILE_THREADS * TILE_THREADS) / TILE;
/** Threads per row in the skinny norm pre-pass: 256 threads over at most SKINNY_MAX_ROWS (8) rows. */
const SKINNY_NORM_LANES = (SKINNY_COLS * SKINNY_SLICES) / SKINNY_MAX_ROWS;

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

/** Fused dispatches per op since the thread started (tests check that the fused path ran, or did not). */
export const fusedStats = { normMatmul: 0, swigluMatmul: 0 };

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
}

/** Storage bindings after the output (0), in order; the uniform block follows them. */
const inputNames = (v: Variant) => ['a', ...(v.norm ? ['wn'] : []), 'bg', ...(v.swiglu ? ['bu'] : [])];

function header(v: Variant): string {
  const names = inputNames(v);
  return `struct U { m : i32, n : i32, k : i32, ldb : i32, gOff : i32, uOff : i32, eps : f32, pad0 : i32, };
@group(0) @binding(0) var<storage, read_write> c : array<f32>;
${names.map((name, i) => `@group(0) @binding(${i + 1}) var<storage, read> ${name} : array<f32>;`).join('\n')}
@group(0) @binding(${names.length + 1}) var<uniform> u : U;`;
}

/** silu(g) · up, as swiglu.ts: 1 / (1 + e^−g) is 0 where e^−g overflows (g < −88), the limit. */
const SILU_TIMES = (g: string, up: string) => `${g} / (1.0 + exp(-${g})) * ${up}`;

function tiledWgsl(v: Variant): string {
  const loadsPerThread = (TILE * TILE_K) / (TILE_THREADS * TILE_THREADS);
  const loads: string[] = [];
  for (let i = 0; i < loadsPerThread; i++) {
    const e = `flat + ${i * TILE_THREADS * TILE_THREADS}`;
    loads.push(`{ let e = ${e}; let r = e / ${TILE_K}; let kc = e % ${TILE_K}; As[r][kc] = readA(row0, r, k0 + kc); }`);
    loads.push(`{ let e = ${e}; let kr = e / ${TILE}; let cc = e % ${TILE}; Bg[kr][cc] = readB(k0 + kr, col0 + cc, u.gOff);${v.swiglu ? ' Bu[kr][cc] = readU(k0 + kr, col0 + cc);' : ''} }`);
  }
  const inner: string[] = [];
  for (let j = 0; j < PER_THREAD; j++) inner.push(`let b${j} = Bg[kk][tx + ${j * TILE_THREADS}];${v.swiglu ? ` let c${j} = Bu[kk][tx + ${j * TILE_THREADS}];` : ''}`);
  for (let i = 0; i < PER_THREAD; i++) {
    inner.push(`{ let av = As[ty + ${i * TILE_THREADS}][kk];`);
    for (let j = 0; j < PER_THREAD; j++) {
      const idx = i * PER_THREAD + j;
      inner.push(`  acc[${idx}] = fma(av, b${j}, acc[${idx}]);${v.swiglu ? ` accU[${idx}] = fma(av, c${j}, accU[${idx}]);` : ''}`);
    }
    inner.push('}');
  }
  const stores: string[] = [];
  for (let i = 0; i < PER_THREAD; i++) {
    for (let j = 0; j < PER_THREAD; j++) {
      const idx = i * PER_THREAD + j;
      const value = v.swiglu ? SILU_TIMES(`acc[${idx}]`, `accU[${idx}]`) : `acc[${idx}]`;
      stores.push(`{ let row = row0 + ty + ${i * TILE_THREADS}; let col = col0 + tx + ${j * TILE_THREADS};
    if (row < u.m && col < u.n) { c[row * u.n + col] = ${value}; } }`);
    }
  }
  // Each row's inverse RMS, NORM_LANES threads a row, before the first tile is staged.
  const normPass = v.norm
    ? `{
    let r = flat / ${NORM_LANES};
    let lane = flat % ${NORM_LANES};
    let row = row0 + r;
    var s = 0.0;
    if (row < u.m) { for (var i = lane; i < u.k; i += ${NORM_LANES}) { let x = a[row * u.k + i]; s = fma(x, x, s); } }
    sq[r][lane] = s;
    workgroupBarrier();
    if (lane == 0) {
      var total = 0.0;
      for (var j = 0; j < ${NORM_LANES}; j++) { total += sq[r][j]; }
      invs[r] = inverseSqrt(total / f32(u.k) + u.eps);
    }
    workgroupBarrier();
  }`
    : '';
  return `${header(v)}
var<workgroup> As : array<array<f32, ${TILE_K}>, ${TILE}>;
var<workgroup> Bg : array<array<f32, ${TILE}>, ${TILE_K}>;
${v.swiglu ? `var<workgroup> Bu : array<array<f32, ${TILE}>, ${TILE_K}>;` : ''}
${v.norm ? `var<workgroup> sq : array<array<f32, ${NORM_LANES}>, ${TILE}>;\nvar<workgroup> invs : array<f32, ${TILE}>;` : ''}

fn readA(row0 : i32, r : i32, kk : i32) -> f32 {
  let row = row0 + r;
  if (row >= u.m || kk >= u.k) { return 0.0; }
  return ${v.norm ? 'a[row * u.k + kk] * invs[r] * wn[kk]' : 'a[row * u.k + kk]'};
}
fn readB(kk : i32, col : i32, off : i32) -> f32 {
  if (kk >= u.k || col >= u.n) { return 0.0; }
  return bg[kk * u.ldb + off + col];
}
${v.swiglu ? `fn readU(kk : i32, col : i32) -> f32 {
  if (kk >= u.k || col >= u.n) { return 0.0; }
  return bu[kk * u.ldb + u.uOff + col];
}` : ''}

@compute @workgroup_size(${TILE_THREADS}, ${TILE_THREADS}, 1)
fn main(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>) {
  let tx = i32(lid.x);
  let ty = i32(lid.y);
  let flat = ty * ${TILE_THREADS} + tx;
  let row0 = i32(wid.y) * ${TILE};
  let col0 = i32(wid.x) * ${TILE};
  ${normPass}
  var acc : array<f32, ${PER_THREAD * PER_THREAD}>;
  ${v.swiglu ? `var accU : array<f32, ${PER_THREAD * PER_THREAD}>;` : ''}
  for (var k0 = 0; k0 < u.k; k0 += ${TILE_K}) {
    ${loads.join('\n    ')}
    workgroupBarrier();
    for (var kk = 0; kk < ${TILE_K}; kk++) {
      ${inner.join('\n      ')}
    }
    workgroupBarrier();
  }
  ${stores.join('\n  ')}
}`;
}

function skinnyWgsl(v: Variant, rows: number): string {
  const threads = SKINNY_COLS * SKINNY_SLICES;
  const perSlice = SKINNY_K_BLOCK / SKINNY_SLICES;
  const each = (f: (m: number) => string, sep = ' ') => Array.from({ length: rows }, (_, m) => f(m)).join(sep);
  const sum = (m: number) => `red[0][${m}][cl] + red[1][${m}][cl] + red[2][${m}][cl] + red[3][${m}][cl]`;
  const normPass = v.norm
    ? `{
    let r = t / ${SKINNY_NORM_LANES};
    let lane = t % ${SKINNY_NORM_LANES};
    var s = 0.0;
    if (r < ${rows}) { for (var i = lane; i < u.k; i += ${SKINNY_NORM_LANES}) { let x = a[r * u.k + i]; s = fma(x, x, s); } }
    sq[r][lane] = s;
    workgroupBarrier();
    if (lane == 0 && r < ${rows}) {
      var total = 0.0;
      for (var j = 0; j < ${SKINNY_NORM_LANES}; j++) { total += sq[r][j]; }
      invs[r] = inverseSqrt(total / f32(u.k) + u.eps);
    }
    workgroupBarrier();
  }`
    : '';
  const epilogue = v.swiglu
    ? `${each((m) => `red[slice][${m}][cl] = acc[${m}];`)}
  workgroupBarrier();
  var g : array<f32, ${rows}>;
  if (slice == 0 && col < u.n) { ${each((m) => `g[${m}] = ${sum(m)};`)} }
  workgroupBarrier();
  ${each((m) => `red[slice][${m}][cl] = accU[${m}];`)}
  workgroupBarrier();
  if (slice == 0 && col < u.n) {
    ${each((m) => `c[${m} * u.n + col] = ${SILU_TIMES(`g[${m}]`, `(${sum(m)})`)};`, '\n    ')}
  }`
    : `${each((m) => `red[slice][${m}][cl] = acc[${m}];`)}
  workgroupBarrier();
  if (slice == 0 && col < u.n) {
    ${each((m) => `c[${m} * u.n + col] = ${sum(m)};`, '\n    ')}
  }`;
  return `${header(v)}
var<workgroup> As : array<array<f32, ${SKINNY_K_BLOCK}>, ${rows}>;
var<workgroup> red : array<array<array<f32, ${SKINNY_COLS}>, ${rows}>, ${SKINNY_SLICES}>;
${v.norm ? `var<workgroup> sq : array<array<f32, ${SKINNY_NORM_LANES}>, ${SKINNY_MAX_ROWS}>;\nvar<workgroup> invs : array<f32, ${rows}>;` : ''}

@compute @workgroup_size(${threads}, 1, 1)
fn main(@builtin(local_invocation_index) li : u32, @builtin(workgroup_id) wid : vec3<u32>) {
  let t = i32(li);
  let cl = t % ${SKINNY_COLS};
  let slice = t / ${SKINNY_COLS};
  let col = i32(wid.x) * ${SKINNY_COLS} + cl;
  ${normPass}
  var acc : array<f32, ${rows}>;
  ${v.swiglu ? `var accU : array<f32, ${rows}>;` : ''}
  for (var k0 = 0; k0 < u.k; k0 += ${SKINNY_K_BLOCK}) {
    for (var e = t; e < ${rows * SKINNY_K_BLOCK}; e += ${threads}) {
      let row = e / ${SKINNY_K_BLOCK};
      let kk = k0 + e % ${SKINNY_K_BLOCK};
      var value = 0.0;
      if (kk < u.k) { value = ${v.norm ? 'a[row * u.k + kk] * invs[row] * wn[kk]' : 'a[row * u.k + kk]'}; }
      As[row][e % ${SKINNY_K_BLOCK}] = value;
    }
    workgroupBarrier();
    if (col < u.n) {
      let kEnd = min(${perSlice}, u.k - k0 - slice * ${perSlice});
      for (var i = 0; i < kEnd; i++) {
        let kk = slice * ${perSlice} + i;
        let bv = bg[(k0 + kk) * u.ldb + u.gOff + col];
        ${v.swiglu ? 'let uv = bu[(k0 + kk) * u.ldb + u.uOff + col];' : ''}
        ${each((m) => `acc[${m}] = fma(As[${m}][kk], bv, acc[${m}]);${v.swiglu ? ` accU[${m}] = fma(As[${m}][kk], uv, accU[${m}]);` : ''}`)}
      }
    }
    workgroupBarrier();
  }
  ${epilogue}
}`;
}

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
  const dtypes = [p.x, p.b, ...(p.up ? [p.up] : []), ...(p.normWeight ? [p.normWeight] : [])].map((t) => t.dtype);
  if (dtypes.some((d) => d !== 'float32')) throw new FusedMatmulShapeError(`float32 operands only, not ${dtypes.join(', ')}`);
  if (p.b.shape.length !== 2 || p.b.shape[0] !== k || (p.up && !tf.util.arraysEqual(p.up.shape, p.b.shape))) throw new FusedMatmulShapeError(`rows [${p.x.shape}] against weights [${p.b.shape}]${p.up ? ` and [${p.up.shape}]` : ''}`);
  if (p.gateOffset + p.n > ldb || p.upOffset + p.n > ldb) throw new FusedMatmulShapeError(`${p.n} columns from offsets ${p.gateOffset}, ${p.upOffset} exceed the weight's ${ldb}`);
  if (p.normWeight && !tf.util.arraysEqual(p.normWeight.shape, [k])) throw new FusedMatmulShapeError(`norm weight [${p.normWeight.shape}] for rows of ${k}`);
  const v: Variant = { norm: p.normWeight !== null, swiglu: p.up !== null };
  const tag = `${v.norm ? 'norm' : ''}${v.swiglu ? 'swiglu' : ''}`;
  const skinny = m <= SKINNY_MAX_ROWS && Math.ceil(p.n / SKINNY_COLS) <= MAX_WORKGROUPS_PER_DIMENSION;
  const inputs = [p.x, ...(p.normWeight ? [p.normWeight] : []), p.b, ...(p.up ? [p.up] : [])];
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

/** Register both kernels: {x, normWeight?, b} → A'·B, and {x, normWeight?, gate, up} → silu(A'·gate)·(A'·up). */
export function registerFusedMatmuls(): void {
  const attrsOf = (attrs: unknown) => attrs as FusedAttrs;
  tf.registerKernel({
    kernelName: NORM_MATMUL_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const a = attrsOf(attrs);
      fusedStats.normMatmul++;
      return runFusedMatmul(asWebGpu(backend), { x: inputs.x as tf.TensorInfo, normWeight: (inputs.normWeight as tf.TensorInfo | undefined) ?? null, eps: a.eps, b: inputs.b as tf.TensorInfo, up: null, n: a.n, gateOffset: a.gateOffset, upOffset: 0 });
    },
  });
  tf.registerKernel({
    kernelName: SWIGLU_MATMUL_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const a = attrsOf(attrs);
      fusedStats.swigluMatmul++;
      return runFusedMatmul(asWebGpu(backend), { x: inputs.x as tf.TensorInfo, normWeight: (inputs.normWeight as tf.TensorInfo | undefined) ?? null, eps: a.eps, b: inputs.gate as tf.TensorInfo, up: inputs.up as tf.TensorInfo, n: a.n, gateOffset: a.gateOffset, upOffset: a.upOffset });
    },
  });
}
