/**
 * Our BatchMatMul for the webgpu backend: C[b] = op(A[b]) · op(B[b]), op = transpose or not, float32 results.
 *
 * Shapes of work and their shaders:
 * - tiled (training, prefill) and skinny (decoding: at most SKINNY_MAX_ROWS rows of A, B not transposed): the
 *   skeletons of product-wgsl.ts, filled in here with each operand's layout (transposed or not, batched). Tile
 *   loads are bounds-checked (zero outside), so any M, N, K works; the load order follows each operand's layout so
 *   that global reads stay coalesced.
 * - skinny with subgroups (the 'subgroup-*' kernels, where the device has subgroups): the same decode products, and
 *   those with B transposed (a tied head), which the plain skinny shader leaves to the tiled one. A subgroup takes
 *   four columns of C at a time and its lanes split K between them, so that a column's K is walked by a subgroup's
 *   width of lanes instead of a quarter of the workgroup's threads, and the lanes' partial sums meet through
 *   `subgroupAdd`: no workgroup memory, no barrier. It is correct for any subgroup size (the shader counts its lanes;
 *   see skinnySubgroupWgsl). Training's (tiled) products have no subgroup shader: those kernels run the tiled one.
 *
 * The kernel, a choice (setMatmulKernel, or AGENTJET_WEBGPU_MATMUL at registration):
 * - 'auto' (default): ours, ours with subgroups (skinny products, where the device has subgroups) or tfjs's, f32,
 *   whichever calibrateMatmul measured fastest on this device for the product's kind (skinny or tiled); 'tiled-f32'
 *   until it has run. No GPU was at hand when these shaders were written, so the backend's selection measures them
 *   against tfjs's (and each other) instead of assuming one wins; and a kernel whose product disagrees with
 *   'tiled-f32''s there (the self-check ran that one) is not chosen.
 * - 'tiled-f32': ours, f32 everywhere.
 * - 'tiled-f16', used only where the device compiles `enable f16;` (else f32 runs): B is read from an f16 copy
 *   (made once per tensor and kept while the tensor lives: a weight is converted once per policy version, then every
 *   decode step reads half the bytes) and A is rounded to f16 as it is staged; workgroup tiles are f16; products and
 *   sums are f32 (f16 products of un-normalised activations and weights can overflow 65504). Results differ from
 *   f32 by f16's rounding of the inputs (relative 2⁻¹¹ each).
 * - 'subgroup-f32', 'subgroup-f16': as 'tiled-f32' and 'tiled-f16', skinny products through the subgroup shader
 *   (f16: B from its f16 copy, A and the sums f32, as the plain skinny shader does). Without subgroups they are
 *   'tiled-f32' and 'tiled-f16' (and 'subgroup-f16' is 'subgroup-f32' without shader-f16).
 * - 'tfjs': tfjs-backend-webgpu's own kernel, for comparison.
 * Mixed-precision training (worker/precision.ts) overrides the choice for the products inside withF16Matmuls,
 * where the device has shader-f16: every product runs the tiled shader with f16 tiles and f32 sums, A and B rounded
 * to f16 as they are staged (activations and gradients stay f32 tensors in between: tfjs has no float16 dtype), and
 * a B whose f16 copy was made by holdF16Copies (the master weights, once per optimizer step) is read from that copy,
 * half the bytes. The skinny shaders are not used there: they round only B, and training's products are not skinny.
 * Staged through f16 tiles, a value past f16's range becomes ±inf (seen on lavapipe), which is what dynamic loss
 * scaling (worker/loss-scale.ts) detects.
 * Whatever we do not handle (other dtypes, batch broadcasting other than 1-to-many, grids over the limit) goes to
 * tfjs's kernel, which stays registered as the fallback.
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, bestMsPerRun, CALIBRATION_CHECK_TOLERANCE, CALIBRATION_TARGET_MS, dispatch, MAX_WORKGROUPS_PER_DIMENSION, relativeDeviation, type WebGpuBackend } from './gpu.ts';
import { featuresOf } from './device.ts';
import { type ProductShader, SKINNY_COLS, SKINNY_MAX_ROWS, skinnyProductWgsl, TILE, tiledProductWgsl } from './product-wgsl.ts';

/**
 * Threads per workgroup of the subgroup skinny shader: 16 subgroups of 8 (lavapipe, Intel), 4 of 32 (NVIDIA), 2 of
 * 64 (AMD), so that every subgroup size dividing 128 gives each subgroup the same number of column groups.
 */
export const SUBGROUP_SKINNY_THREADS = 128;
/** The subgroup skinny shader's workgroup size now (SUBGROUP_SKINNY_THREADS but in tests: setSubgroupSkinnyThreads). */
let sgThreads = SUBGROUP_SKINNY_THREADS;
/**
 * Columns of C one subgroup computes at a time: per K position a lane reads 4 neighbouring values of B (16 bytes,
 * not transposed) or 4 columns each contiguous across lanes (transposed), and keeps rows × 4 sums.
 */
const SG_GROUP_COLS = 4;
/** Column groups per workgroup: 16 × 4 = 64 columns, as many workgroups as the plain skinny shader. */
const SG_GROUPS = 16;
const SG_COLS = SG_GROUP_COLS * SG_GROUPS;

export type MatmulKernel = 'auto' | 'tiled-f32' | 'tiled-f16' | 'subgroup-f32' | 'subgroup-f16' | 'tfjs';
export const MATMUL_KERNELS: readonly MatmulKernel[] = ['auto', 'tiled-f32', 'tiled-f16', 'subgroup-f32', 'subgroup-f16', 'tfjs'];

export class UnknownMatmulKernelError extends Error {
  override name = 'UnknownMatmulKernelError';
}

export class SubgroupThreadsError extends Error {
  override name = 'SubgroupThreadsError';
}

export class MatmulAddendShapeError extends Error {
  override name = 'MatmulAddendShapeError';
}

/**
 * For tests: the subgroup skinny shader's workgroup size (1…SUBGROUP_SKINNY_THREADS; SUBGROUP_SKINNY_THREADS restores it). Fewer threads leave
 * each subgroup several column groups in turn, as a GPU with wide subgroups does (lavapipe's 16 subgroups of 8 in
 * 128 threads take one each), and a count that is not a multiple of the subgroup size leaves a subgroup part-full.
 */
export function setSubgroupSkinnyThreads(threads: number): void {
  if (!Number.isInteger(threads) || threads < 1 || threads > SUBGROUP_SKINNY_THREADS) throw new SubgroupThreadsError(`subgroup skinny threads must be an integer in 1…${SUBGROUP_SKINNY_THREADS}, not ${threads}`);
  sgThreads = threads;
}

let chosen: MatmulKernel = 'auto';

/** The two kinds of product, each with its own shader and its own measured choice under 'auto'. */
export type ProductKind = 'skinny' | 'tiled';
/** What 'auto' may run: the f32 kernels (calibration measures them). */
type AutoKernel = 'tiled-f32' | 'subgroup-f32' | 'tfjs';
const autoChoice: Record<ProductKind, AutoKernel> = { skinny: 'tiled-f32', tiled: 'tiled-f32' };

/**
 * BatchMatMuls per path since the thread started ('skinnySubgroup': the subgroup skinny shader, counted in 'skinny'
 * too; 'fallback': tfjs's kernel ran; 'mixed': inside withF16Matmuls, 'mixedF16Weights' of which read B from a held
 * f16 copy; 'epilogues': products that added an addend in their stores, matMulPlus's); benchmarks report it, tests
 * check it.
 */
export const matmulStats = { tiled: 0, skinny: 0, skinnySubgroup: 0, f16: 0, fallback: 0, mixed: 0, mixedF16Weights: 0, epilogues: 0 };

/** Whether products now run in mixed precision (inside withF16Matmuls). */
let mixedScope = false;

/**
 * Run `fn` (synchronous: a forward and its backward) with every BatchMatMul it records in mixed precision on
 * devices with shader-f16 (see the header); elsewhere the products run as chosen. Nested calls are fine.
 */
export function withF16Matmuls<T>(fn: () => T): T {
  const before = mixedScope;
  mixedScope = true;
  try {
    return fn();
  } finally {
    mixedScope = before;
  }
}

/** Whether the products recorded now run in mixed precision (model.ts then transposes weights inside the product). */
export function f16MatmulsActive(): boolean {
  return mixedScope;
}

/** Choose the webgpu BatchMatMul (takes effect at the next matmul). */
export function setMatmulKernel(kernel: MatmulKernel): void {
  if (!MATMUL_KERNELS.includes(kernel)) throw new UnknownMatmulKernelError(`unknown matmul kernel "${kernel}" (one of ${MATMUL_KERNELS.join(', ')})`);
  chosen = kernel;
}

export function matmulKernel(): MatmulKernel {
  return chosen;
}

type RunnableKernel = Exclude<MatmulKernel, 'auto'>;

/**
 * The kernel that runs on this device for a kind of product: a choice the device lacks a feature for falls back to
 * the one without it ('tiled-f16' is 'tiled-f32' without shader-f16; 'subgroup-*' is 'tiled-*' without subgroups,
 * and 'subgroup-f16' is 'subgroup-f32' without shader-f16).
 */
function effectiveKernel(device: GPUDevice, kind: ProductKind): RunnableKernel {
  const k = chosen === 'auto' ? autoChoice[kind] : chosen;
  const { shaderF16, subgroups } = featuresOf(device);
  if (k === 'tiled-f16') return shaderF16 ? k : 'tiled-f32';
  if (k === 'subgroup-f32') return subgroups ? k : 'tiled-f32';
  if (k === 'subgroup-f16') return subgroups ? (shaderF16 ? k : 'subgroup-f32') : shaderF16 ? 'tiled-f16' : 'tiled-f32';
  return k;
}

const isSubgroupKernel = (k: RunnableKernel) => k === 'subgroup-f32' || k === 'subgroup-f16';
const isF16Kernel = (k: RunnableKernel) => k === 'tiled-f16' || k === 'subgroup-f16';

// ---------------------------------------------------------------------------------------------------------------
// WGSL

interface Variant {
  transposeA: boolean;
  transposeB: boolean;
  /** f16 tiles (operands rounded to f16 as staged); sums stay f32. */
  f16: boolean;
  /** B is bound as f16 storage (an f16 copy); else f32, rounded as staged when `f16`. */
  bHalf: boolean;
  addend: Addend;
}

/**
 * What the epilogue adds to each output (matMulPlus): nothing, a tensor of the output's shape ('rows': a residual)
 * or one value per column ('columns': a bias). One more read per output, against K per output for the product.
 */
export type Addend = 'none' | 'rows' | 'columns';

/** The epilogue's term for the output at `index`, column `col`. */
const addendTerm = (addend: Addend, index: string, col: string) => (addend === 'rows' ? ` + addend[${index}]` : addend === 'columns' ? ` + addend[${col}]` : '');

const UNIFORMS = `struct U {
  m : i32, n : i32, k : i32, batch : i32,
  aBatchStride : i32, bBatchStride : i32, pad0 : i32, pad1 : i32,
};`;

function bindings(f16: boolean, bHalf: boolean, addend: Addend): string {
  const adds = addend !== 'none';
  return `${f16 ? 'enable f16;\n' : ''}${UNIFORMS}
@group(0) @binding(0) var<storage, read_write> c : array<f32>;
@group(0) @binding(1) var<storage, read> a : array<f32>;
@group(0) @binding(2) var<storage, read> b : array<${bHalf ? 'f16' : 'f32'}>;
${adds ? '@group(0) @binding(3) var<storage, read> addend : array<f32>;\n' : ''}@group(0) @binding(${adds ? 4 : 3}) var<uniform> u : U;`;
}

/** Index of A[row, kk] / B[kk, col] in their batch, in each operand's layout. */
const aIndex = (v: Variant) => (v.transposeA ? 'kk * u.m + row' : 'row * u.k + kk');
const bIndex = (v: Variant) => (v.transposeB ? 'col * u.k + kk' : 'kk * u.n + col');

/** The plain product in the skeletons' terms: C[b] = A[b] · B[b], each operand in its layout. */
function plainProduct(v: Variant): ProductShader {
  return {
    header: bindings(v.f16, v.bHalf, v.addend),
    prologue: `let batch = i32(wid.z);
  let aOff = batch * u.aBatchStride;
  let bOff = batch * u.bBatchStride;
  let cOff = batch * u.m * u.n;`,
    readA: `a[aOff + ${aIndex(v)}]`,
    readB: [`b[bOff + ${bIndex(v)}]`],
    output: ([sum]) => `${sum}${addendTerm(v.addend, 'cOff + row * u.n + col', 'col')}`,
    outputIndex: 'cOff + row * u.n + col',
  };
}

const tiledWgsl = (v: Variant) => tiledProductWgsl(plainProduct(v), { tileType: v.f16 ? 'f16' : 'f32', transposeA: v.transposeA, transposeB: v.transposeB });
/** B not transposed (kindOf sends a transposed B to the tiled or subgroup shader). */
const skinnyWgsl = (v: Variant, rows: number) => skinnyProductWgsl(plainProduct(v), rows);

/**
 * The subgroup skinny shader: any rows ≤ SKINNY_MAX_ROWS, B transposed or not. Each subgroup takes a group of
 * SG_GROUP_COLS columns at a time; its lanes split K between them (lane r takes K positions r, r + lanes, …, so
 * neighbouring lanes read neighbouring addresses of A and of B where they are not and are transposed, and A's ≤ 8
 * rows apart otherwise), and `subgroupAdd` sums
 * their partials: no workgroup memory, no barrier. Nothing assumes a subgroup size or which invocations share a
 * subgroup: the lane count and a dense lane rank come from the subgroup itself (subgroupAdd(1),
 * subgroupExclusiveAdd(1)), so a subgroup of any size, or one not full, covers all of K, and the column groups are
 * shared out by subgroup_id / num_subgroups. Every lane of a subgroup runs the same loops (their bounds depend on
 * the subgroup, never the lane), which WGSL's analysis cannot see: hence `diagnostic(off, subgroup_uniformity)`.
 */
function skinnySubgroupWgsl(v: Variant, rows: number): string {
  const readB = Array.from({ length: SG_GROUP_COLS }, (_, j) => `readB(bOff, kk, col0 + ${j})`).join(', ');
  const accs = Array.from({ length: rows }, (_, m) => `acc[${m}] = fma(vec4<f32>(f32(a[aOff + aAt(${m}, kk)])), bv, acc[${m}]);`).join('\n        ');
  const stores = Array.from({ length: rows }, (_, m) => `{ let s = subgroupAdd(acc[${m}]);
        if (rank == 0) { for (var j = 0; j < ${SG_GROUP_COLS}; j++) { if (col0 + j < u.n) { c[cOff + ${m} * u.n + col0 + j] = s[j]${addendTerm(v.addend, `cOff + ${m} * u.n + col0 + j`, 'col0 + j')}; } } } }`).join('\n      ');
  // Directives first: the extensions, then the diagnostic, then bindings' declarations.
  return `enable subgroups;
${v.f16 ? 'enable f16;\n' : ''}diagnostic(off, subgroup_uniformity);
${bindings(false, v.bHalf, v.addend)}

fn aAt(row : i32, kk : i32) -> i32 { return ${aIndex(v)}; }
fn readB(off : i32, kk : i32, col : i32) -> f32 {
  if (col >= u.n) { return 0.0; }
  return f32(b[off + ${bIndex(v)}]);
}

@compute @workgroup_size(${sgThreads}, 1, 1)
fn main(@builtin(workgroup_id) wid : vec3<u32>, @builtin(subgroup_id) sg : u32, @builtin(num_subgroups) nsg : u32) {
  let lanes = i32(subgroupAdd(1u));
  let rank = i32(subgroupExclusiveAdd(1u));
  let batch = i32(wid.z);
  let aOff = batch * u.aBatchStride;
  let bOff = batch * u.bBatchStride;
  let cOff = batch * u.m * u.n;
  for (var g = i32(sg); g < ${SG_GROUPS}; g += i32(nsg)) {
    let col0 = i32(wid.x) * ${SG_COLS} + g * ${SG_GROUP_COLS};
    if (col0 >= u.n) { break; }
    // Initialised explicitly: a var without an initialiser in a loop kept its last iteration's value on lavapipe.
    var acc = array<vec4<f32>, ${rows}>();
    for (var kk = rank; kk < u.k; kk += lanes) {
      let bv = vec4<f32>(${readB});
        ${accs}
    }
      ${stores}
  }
}`;
}

/** f32 → f16 copy of a whole buffer (two values per invocation, so the output is whole u32 words). */
const TO_F16_WORKGROUP = 256;
const TO_F16_WGSL = `enable f16;
struct U { n : i32, rowStride : i32, pad0 : i32, pad1 : i32, };
@group(0) @binding(0) var<storage, read_write> out : array<vec2<f16>>;
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(2) var<uniform> u : U;
@compute @workgroup_size(${TO_F16_WORKGROUP}) fn main(@builtin(global_invocation_id) g : vec3<u32>) {
  let p = i32(g.y) * u.rowStride + i32(g.x);
  let i = 2 * p;
  if (i >= u.n) { return; }
  let hi = select(0.0, x[min(i + 1, u.n - 1)], i + 1 < u.n);
  out[p] = vec2<f16>(f16(x[i]), f16(hi));
}`;

// ---------------------------------------------------------------------------------------------------------------
// f16 copies of B, kept while their tensor lives

/** Per backend: source dataId → its f16 copy (a float32 tensor of half as many elements, bytes reinterpreted). */
const f16Copies = new WeakMap<WebGpuBackend, Map<object, tf.TensorInfo>>();

/** Release copies whose source tensor was disposed (tfjs defers the buffer's release past queued work). */
function sweepF16Copies(gpu: WebGpuBackend, copies: Map<object, tf.TensorInfo>): void {
  for (const [src, copy] of copies) {
    if (!gpu.tensorMap.has(src)) {
      copies.delete(src);
      gpu.disposeData(copy.dataId);
    }
  }
}

function f16CopyOf(gpu: WebGpuBackend, t: tf.TensorInfo): tf.TensorInfo {
  let copies = f16Copies.get(gpu);
  if (!copies) f16Copies.set(gpu, (copies = new Map()));
  sweepF16Copies(gpu, copies);
  const found = copies.get(t.dataId);
  if (found) return found;
  const n = tf.util.sizeFromShape(t.shape);
  const pairs = Math.ceil(n / 2);
  const groups = Math.ceil(pairs / TO_F16_WORKGROUP);
  const gx = Math.min(groups, MAX_WORKGROUPS_PER_DIMENSION);
  const copy = dispatch(gpu, {
    key: 'to-f16',
    wgsl: () => TO_F16_WGSL,
    name: 'ToF16',
    inputs: [t],
    output: { shape: [pairs] },
    uniforms: [{ i32: n }, { i32: gx * TO_F16_WORKGROUP }],
    workgroups: [gx, Math.ceil(groups / gx), 1],
  });
  copies.set(t.dataId, copy);
  return copy;
}

/**
 * Make (or keep) the f16 copies of `weights` that mixed-precision products read B from. A variable's data changes
 * identity at every assign, so calling this after each optimizer step refreshes the copies of the weights it
 * changed and keeps the others; copies of replaced data are released at the next call (or releaseStaleF16Copies,
 * or a matmul in 'tiled-f16').
 * Only on webgpu with shader-f16 (elsewhere nothing reads them); returns the number of copies made.
 */
export function holdF16Copies(weights: readonly tf.Tensor[]): number {
  if (tf.getBackend() !== 'webgpu') return 0;
  const gpu = asWebGpu(tf.backend());
  if (!featuresOf(gpu.device).shaderF16) return 0;
  let copies = f16Copies.get(gpu);
  if (!copies) f16Copies.set(gpu, (copies = new Map()));
  sweepF16Copies(gpu, copies);
  let made = 0;
  for (const w of weights) {
    if (w.dtype !== 'float32' || copies.has(w.dataId)) continue;
    f16CopyOf(gpu, w);
    made++;
  }
  return made;
}

/** Release the f16 copies whose source tensors were disposed (an engine closing), without waiting for the next product. */
export function releaseStaleF16Copies(): void {
  if (tf.getBackend() !== 'webgpu') return;
  const gpu = asWebGpu(tf.backend());
  const copies = f16Copies.get(gpu);
  if (copies) sweepF16Copies(gpu, copies);
}

/**
 * The f16 copy a product of `kind` reads the weight `b` from where the kernel chosen for that kind on this device
 * is an f16 one, so that a fused product (fused-matmul.ts) reads the weights' bytes the plain one would; else null
 * (read as f32). Mixed precision's products have their own held copies and never come here.
 */
export function f16WeightFor(gpu: WebGpuBackend, b: tf.TensorInfo, kind: ProductKind): tf.TensorInfo | null {
  return isF16Kernel(effectiveKernel(gpu.device, kind)) ? f16CopyOf(gpu, b) : null;
}

/** The held f16 copy of `t`'s data, or null (read as f32 and rounded as staged). */
function heldF16Copy(gpu: WebGpuBackend, t: tf.TensorInfo): tf.TensorInfo | null {
  return f16Copies.get(gpu)?.get(t.dataId) ?? null;
}

// ---------------------------------------------------------------------------------------------------------------
// The kernel

interface MatmulShape {
  batch: number;
  m: number;
  n: number;
  k: number;
  aBatch: number;
  bBatch: number;
  outShape: number[];
}

/** The product's shape, or null where tfjs's kernel should run (broadcasting we do not handle, bad dtypes). */
function shapeOf(a: tf.TensorInfo, b: tf.TensorInfo, transposeA: boolean, transposeB: boolean): MatmulShape | null {
  if (a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length < 2 || b.shape.length < 2) return null;
  const ra = a.shape.length;
  const rb = b.shape.length;
  const m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  const k = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  const kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  const n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  if (k !== kb) return null; // tfjs's kernel raises its own error
  const outerA = a.shape.slice(0, -2);
  const outerB = b.shape.slice(0, -2);
  const aBatch = tf.util.sizeFromShape(outerA);
  const bBatch = tf.util.sizeFromShape(outerB);
  // Equal batches (same outer shape), or one operand shared by every batch of the other.
  const same = outerA.length === outerB.length && outerA.every((d, i) => d === outerB[i]);
  if (!same && aBatch !== 1 && bBatch !== 1) return null;
  const batch = Math.max(aBatch, bBatch);
  const outShape = [...tf.broadcast_util.assertAndGetBroadcastShape(outerA, outerB), m, n];
  if (m * n * k === 0 || batch > MAX_WORKGROUPS_PER_DIMENSION) return null;
  if (Math.ceil(m / TILE) > MAX_WORKGROUPS_PER_DIMENSION || Math.ceil(n / TILE) > MAX_WORKGROUPS_PER_DIMENSION) return null;
  return { batch, m, n, k, aBatch, bBatch, outShape };
}

/**
 * Skinny where A has at most SKINNY_MAX_ROWS rows and B is not transposed (the plain skinny shader reads B's rows);
 * with B transposed (a tied head) too where the skinny kind's kernel is a subgroup one, which reads either layout.
 */
function kindOf(device: GPUDevice, s: MatmulShape, transposeB: boolean): ProductKind {
  if (s.m > SKINNY_MAX_ROWS || Math.ceil(s.n / SKINNY_COLS) > MAX_WORKGROUPS_PER_DIMENSION) return 'tiled';
  return !transposeB || isSubgroupKernel(effectiveKernel(device, 'skinny')) ? 'skinny' : 'tiled';
}

/**
 * How a product runs: 'f32'; 'f16' (the 'tiled-f16' kernel: B from an f16 copy made for it); 'mixed' (inside
 * withF16Matmuls: tiled, f16 tiles, B from a held f16 copy where there is one).
 */
type Precision = 'f32' | 'f16' | 'mixed';

/** How a product runs: its precision, and whether a skinny product takes the subgroup shader. */
interface Plan {
  precision: Precision;
  kind: ProductKind;
  subgroup: boolean;
}

/** A product's epilogue: the tensor added, and how (Addend). */
interface Epilogue {
  addend: tf.TensorInfo;
  kind: Exclude<Addend, 'none'>;
}

function runMatmul(gpu: WebGpuBackend, a: tf.TensorInfo, b: tf.TensorInfo, v: Pick<Variant, 'transposeA' | 'transposeB'>, s: MatmulShape, plan: Plan, epilogue: Epilogue | null = null): tf.TensorInfo {
  const { precision } = plan;
  const held = precision === 'mixed' ? heldF16Copy(gpu, b) : null;
  const f16 = precision !== 'f32';
  const bHalf = precision === 'f16' || held !== null;
  const variant: Variant = { ...v, f16, bHalf, addend: epilogue?.kind ?? 'none' };
  const skinny = precision !== 'mixed' && plan.kind === 'skinny';
  const subgroup = skinny && plan.subgroup;
  const bInput = held ?? (precision === 'f16' ? f16CopyOf(gpu, b) : b);
  const tag = `${v.transposeA ? 'T' : 'N'}${v.transposeB ? 'T' : 'N'}-${f16 ? 'f16' : 'f32'}${f16 && !bHalf ? '-b32' : ''}-${variant.addend}`;
  const uniforms = [{ i32: s.m }, { i32: s.n }, { i32: s.k }, { i32: s.batch }, { i32: s.aBatch === 1 ? 0 : s.m * s.k }, { i32: s.bBatch === 1 ? 0 : s.k * s.n }];
  matmulStats[skinny ? 'skinny' : 'tiled']++;
  if (subgroup) matmulStats.skinnySubgroup++;
  if (precision === 'f16') matmulStats.f16++;
  if (precision === 'mixed') matmulStats.mixed++;
  if (held) matmulStats.mixedF16Weights++;
  if (epilogue) matmulStats.epilogues++;
  const common = { inputs: [a, bInput, ...(epilogue ? [epilogue.addend] : [])], output: { shape: s.outShape }, uniforms };
  if (subgroup) {
    return dispatch(gpu, { ...common, key: `matmul-skinny-sg-${sgThreads}-${s.m}-${tag}`, wgsl: () => skinnySubgroupWgsl(variant, s.m), name: 'MatMulSkinnySubgroup', workgroups: [Math.ceil(s.n / SG_COLS), 1, s.batch] });
  }
  if (skinny) {
    return dispatch(gpu, { ...common, key: `matmul-skinny-${s.m}-${tag}`, wgsl: () => skinnyWgsl(variant, s.m), name: 'MatMulSkinny', workgroups: [Math.ceil(s.n / SKINNY_COLS), 1, s.batch] });
  }
  return dispatch(gpu, { ...common, key: `matmul-tiled-${tag}`, wgsl: () => tiledWgsl(variant), name: 'MatMulTiled', workgroups: [Math.ceil(s.n / TILE), Math.ceil(s.m / TILE), s.batch] });
}

/**
 * The product by our shaders, with an epilogue if given: mixed precision's tiled f16 product inside withF16Matmuls
 * (where the device has shader-f16), else the kernel chosen for the product's kind on this device. Null where
 * tfjs's kernel takes it (its choice, or a product we do not handle).
 */
function ourProduct(gpu: WebGpuBackend, a: tf.TensorInfo, b: tf.TensorInfo, transposeA: boolean, transposeB: boolean, epilogue: Epilogue | null = null): tf.TensorInfo | null {
  const shape = shapeOf(a, b, transposeA, transposeB);
  if (!shape) return null;
  const v = { transposeA, transposeB };
  if (mixedScope && featuresOf(gpu.device).shaderF16) return runMatmul(gpu, a, b, v, shape, { precision: 'mixed', kind: 'tiled', subgroup: false }, epilogue);
  const kind = kindOf(gpu.device, shape, transposeB);
  const kernel = effectiveKernel(gpu.device, kind);
  if (kernel === 'tfjs') return null;
  return runMatmul(gpu, a, b, v, shape, { precision: isF16Kernel(kernel) ? 'f16' : 'f32', kind, subgroup: isSubgroupKernel(kernel) }, epilogue);
}

/** Register our BatchMatMul for webgpu, keeping tfjs's as the fallback (idempotent). */
export function registerMatmul(): void {
  const original = tf.getKernel(tf.BatchMatMul, 'webgpu');
  if (!original || (original.kernelFunc as { ours?: boolean }).ours) return;
  const fallback = original.kernelFunc;
  const kernelFunc: tf.KernelFunc = (args) => {
    const { inputs, backend, attrs } = args;
    const { transposeA, transposeB } = attrs as unknown as { transposeA: boolean; transposeB: boolean };
    const ours = ourProduct(asWebGpu(backend), inputs.a as tf.TensorInfo, inputs.b as tf.TensorInfo, transposeA, transposeB);
    if (ours) return ours;
    matmulStats.fallback++;
    return fallback(args);
  };
  tf.unregisterKernel(tf.BatchMatMul, 'webgpu');
  tf.registerKernel({ ...original, kernelFunc: Object.assign(kernelFunc, { ours: true }) });
}

export const MATMUL_ADD_KERNEL = 'AgentJetMatmulAdd';

/**
 * Register the product with an epilogue, {a [m, k], b [k, n], addend} → a·b + addend (attrs.addend: 'rows', a
 * tensor [m, n]; 'columns', a bias [n]): one dispatch wherever our BatchMatMul takes the product (ourProduct: the
 * same shader and precision, the addend read in its stores); elsewhere (tfjs's kernel chosen, mixed precision) the
 * product and tfjs's Add, as two.
 */
export function registerMatmulAdd(): void {
  tf.registerKernel({
    kernelName: MATMUL_ADD_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const a = inputs.a as tf.TensorInfo;
      const b = inputs.b as tf.TensorInfo;
      const addend = inputs.addend as tf.TensorInfo;
      const gpu = asWebGpu(backend);
      const kind = (attrs as unknown as { addend: Epilogue['kind'] }).addend;
      const ours = mixedScope || addend.dtype !== 'float32' ? null : ourProduct(gpu, a, b, false, false, { addend, kind });
      if (ours) return ours;
      const product = tf.getKernel(tf.BatchMatMul, 'webgpu')!.kernelFunc({ inputs: { a, b }, backend, attrs: { transposeA: false, transposeB: false } }) as tf.TensorInfo;
      const sum = tf.getKernel(tf.Add, 'webgpu')!.kernelFunc({ inputs: { a: product, b: addend }, backend, attrs: {} }) as tf.TensorInfo;
      gpu.disposeData(product.dataId);
      return sum;
    },
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Calibration: ours (with and without subgroups) against tfjs's, per kind of product, on this device

/** Decode-like product for the skinny kind: one row against a 2048×2048 weight (a small model's projection). */
const CALIBRATION_SKINNY: [number, number, number] = [1, 2048, 2048];
/** Square sizes tried for the tiled kind, doubling while one of our products stays under CALIBRATION_TARGET_MS. */
const CALIBRATION_SQUARES = [256, 512, 1024, 2048];

/**
 * Milliseconds per product a · b with `kernel` (gpu.ts bestMsPerRun), and the product itself (read once, for the
 * check against the reference kernel's; that first run compiles the shader).
 */
async function timedProduct(kernel: MatmulKernel, a: tf.Tensor2D, b: tf.Tensor2D): Promise<{ ms: number; product: Float32Array }> {
  const before = chosen;
  chosen = kernel;
  try {
    const c = tf.matMul(a, b);
    const product = (await c.data()) as Float32Array;
    c.dispose();
    return { ms: await bestMsPerRun(() => tf.matMul(a, b)), product };
  } finally {
    chosen = before;
  }
}

/**
 * The fastest of `candidates` whose product agrees with the first's (the reference: the kernel the backend's
 * self-check ran); ties go to the earlier. The reference is always eligible.
 */
export function fastestAgreeing<K extends string>(candidates: readonly K[], ms: ReadonlyMap<K, number>, deviation: ReadonlyMap<K, number>): K {
  return candidates.reduce((best, k) => (deviation.get(k)! <= CALIBRATION_CHECK_TOLERANCE && ms.get(k)! < ms.get(best)! ? k : best));
}

/** Runs `f` on random operands a [m, k] and b [k, n], released after. */
async function onRandomOperands<T>([m, k, n]: [number, number, number], f: (a: tf.Tensor2D, b: tf.Tensor2D) => Promise<T>): Promise<T> {
  const a = tf.randomNormal([m, k]) as tf.Tensor2D;
  const b = tf.randomNormal([k, n]) as tf.Tensor2D;
  try {
    return await f(a, b);
  } finally {
    tf.dispose([a, b]);
  }
}

let calibration: string | null = null;

/**
 * Under 'auto', measure ours (and, for skinny products, our subgroup shader where the device has subgroups) against
 * tfjs's on the active webgpu backend, per kind, and let 'auto' run the fastest whose product agrees with ours
 * ('tiled-f32', which the backend's self-check ran; a kernel that fails the check is named in the report)
 * (once per thread: a second or two on a GPU, about ten on lavapipe). Returns what it found, for the backend's
 * report; with a kernel chosen explicitly it measures nothing.
 */
export async function calibrateMatmul(): Promise<string> {
  if (chosen !== 'auto') return `matmul: ${chosen} (chosen, not measured)`;
  if (calibration) return calibration;
  // The tiled kind is timed on the first square where one of our products takes CALIBRATION_TARGET_MS.
  let square = CALIBRATION_SQUARES[0];
  for (const n of CALIBRATION_SQUARES) {
    square = n;
    if ((await onRandomOperands([n, n, n], (a, b) => timedProduct('tiled-f32', a, b))).ms > CALIBRATION_TARGET_MS) break;
  }
  const parts: string[] = [];
  // The subgroup shader is a candidate for skinny products only (training's products have no subgroup shader), and
  // only where the device has subgroups (elsewhere 'subgroup-f32' would measure 'tiled-f32' again).
  const subgroups = tf.getBackend() === 'webgpu' && featuresOf(asWebGpu(tf.backend()).device).subgroups;
  for (const [kind, shape] of [
    ['skinny', CALIBRATION_SKINNY],
    ['tiled', [square, square, square]],
  ] as [ProductKind, [number, number, number]][]) {
    // 'tiled-f32' first: the reference every other candidate's product is checked against.
    const candidates: AutoKernel[] = kind === 'skinny' && subgroups ? ['tiled-f32', 'subgroup-f32', 'tfjs'] : ['tiled-f32', 'tfjs'];
    const ms = new Map<AutoKernel, number>();
    const deviation = new Map<AutoKernel, number>();
    await onRandomOperands(shape, async (a, b) => {
      let reference: Float32Array | null = null;
      for (const k of candidates) {
        const run = await timedProduct(k, a, b);
        reference ??= run.product;
        ms.set(k, run.ms);
        deviation.set(k, relativeDeviation(run.product, reference));
      }
    });
    autoChoice[kind] = fastestAgreeing(candidates, ms, deviation);
    const gflops = (t: number) => ((2 * shape[0] * shape[1] * shape[2]) / (t / 1000) / 1e9).toFixed(1);
    const said = (k: AutoKernel) => `${k} ${gflops(ms.get(k)!)}${deviation.get(k)! > CALIBRATION_CHECK_TOLERANCE ? ` (failed its check: off by ${deviation.get(k)!.toExponential(1)})` : ''}`;
    parts.push(`${kind} ${shape.join('×')}: ${autoChoice[kind]} (${candidates.map(said).join(', ')} GFLOP/s)`);
  }
  calibration = `matmul ${parts.join('; ')}`;
  return calibration;
}
