/**
 * Causal attention as fused webgpu kernels (flash attention, Dao et al. 2022/2023), forward and backward, for
 * worker/causal-attention.ts's layout: groups of one kv head each, q [G, (T − queryOffset)·rep, hd] with its rows
 * position-major (row i·rep + r is position queryOffset + i, query head r; pre-scaled by 1/sqrt(hd)), k and v
 * [G, T, hd]. Query position p sees keys 0…p, so a trunk's keys (positions before queryOffset) are seen by every
 * query. tfjs's composition (causal-attention.ts batchedAttention) writes the [G, rows, T] scores, the mask, the
 * probabilities and their gradients; here nothing score-sized is ever stored.
 *
 * - Forward: a workgroup takes ROWS_PER_WORKGROUP consecutive query rows of a group, a thread per row (so the rep
 *   query heads sharing the group's kv head read each key tile once, together: grouped-query attention costs no
 *   copy of k or v). It streams key/value tiles through workgroup memory up to the last key its rows see, keeping a
 *   running max and sum per row (online softmax, f32), and writes y and each row's logsumexp, which the backward
 *   needs. Keys past a row's position are skipped, not masked: the visible keys of a tile are a prefix of it.
 * - Backward (FlashAttention-2's): probabilities are recomputed from q, k and the saved logsumexp. A first kernel
 *   (tiled like the forward) gives dQ = Σⱼ dSᵢⱼ·kⱼ with dSᵢⱼ = Pᵢⱼ·(dYᵢ·vⱼ − Dᵢ), Dᵢ = dYᵢ·yᵢ, and writes D; a second
 *   takes KEYS_PER_WORKGROUP keys of a group, a thread per key, streams the query rows that see them (with their dY,
 *   logsumexp and D) through workgroup memory, and gives dK = Σᵢ dSᵢⱼ·qᵢ and dV = Σᵢ Pᵢⱼ·dYᵢ. Its sums run over every
 *   query row of the group, so dK and dV add up over the rep query heads that share a kv head.
 *
 * Rows are read and summed as vec4s where hd is a multiple of 4 (f32s otherwise). The loops over a row's elements run
 * to a uniform, not a constant: with constant bounds lavapipe's compiler unrolls them into the tile loops they hold,
 * and a pipeline took minutes to build (the dK/dV kernel at hd 128: 216 s; ~1-5 s with the uniform; measured).
 *
 * Bounds: float32 only; hd ≤ MAX_HEAD_DIM (each thread keeps its row in private arrays of hd floats); tensors
 * within the device's storage binding (gpu.ts refuses larger ones by name); the grid within 65,535² workgroups.
 * Not done here: tree layouts (an arbitrary ancestor mask; causal-attention.ts keeps its path for those), f16
 * storage, dropout, sliding windows, decoding (a few query rows would idle most of a 64-row workgroup; decoding
 * attends with tf ops, worker/tensor-decode.ts). Untuned for GPUs: none was at hand when this was written; it is
 * checked and timed on lavapipe (`npm run bench -- webgpu-attention`). A GPU may keep the per-thread arrays in
 * memory rather than registers, since they are indexed by a loop variable it cannot unroll.
 *
 * Three shaders here write two buffers each, and gpu.ts's dispatch makes one output: the other (the forward's
 * logsumexp, the dQ kernel's D, the dK/dV kernel's dV) is made here and bound as an input the shader declares
 * read_write.
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, checkBindable, dispatch, GRID_BUILTINS, gridFor, ourKernelRuns } from './gpu.ts';

export const ATTENTION_KERNEL = 'AgentJetAttention';
export const ATTENTION_GRAD_KERNEL = 'AgentJetAttentionGrad';

/** Head dims up to which the kernels run: the dK/dV kernel keeps 4·hd floats per thread (4 KiB at 256: Gemma's hd). */
export const MAX_HEAD_DIM = 256;

/** Query rows per forward and dQ workgroup, one thread each (a common GPU wave or two; lavapipe runs 8-wide). */
const ROWS_PER_WORKGROUP = 64;
/** Keys per dK/dV workgroup, one thread each (as above). */
const KEYS_PER_WORKGROUP = 64;
/** Floats of workgroup memory a kernel may use: WebGPU's guaranteed 16 KiB (maxComputeWorkgroupStorageSize). */
const WORKGROUP_FLOATS = 16_384 / 4;
/** Longest tile streamed through workgroup memory: each thread keeps a value or two per tile row in private arrays. */
const MAX_TILE = 64;

/** Rows of a tile holding `perRow` floats each within the workgroup memory (≥ 7 at MAX_HEAD_DIM). */
const tileRows = (perRow: number) => Math.min(MAX_TILE, Math.floor(WORKGROUP_FLOATS / perRow));

/** Dispatches since the thread started; tests check that the model's attention took this path, not the fallback. */
export const attentionStats = { forward: 0, backward: 0 };

export class AttentionShapeError extends Error {
  override name = 'AttentionShapeError';
}

/** `tiles`: workgroups per group; `width`: elements (vec4 or f32) per row, the bound of the loops over a row. */
const UNIFORMS = `struct U { groups : i32, rows : i32, keys : i32, rep : i32, queryOffset : i32, tiles : i32, width : i32, pad0 : i32, };`;

/**
 * How a row of hd floats is held: as hd/4 vec4s where hd is a multiple of 4 (every model's; a quarter of the load
 * instructions, `dot` and vector fma), else as hd f32s. Storage, tiles and per-thread rows all use the same type.
 */
interface Lanes {
  /** WGSL type of one element. */
  t: string;
  /** Elements per row. */
  n: number;
  /** Element a · element b, summed over its lanes. */
  dot: (a: string, b: string) => string;
}

function lanesOf(hd: number): Lanes {
  return hd % 4 === 0 ? { t: 'vec4<f32>', n: hd / 4, dot: (a, b) => `dot(${a}, ${b})` } : { t: 'f32', n: hd, dot: (a, b) => `${a} * ${b}` };
}

/** Dot product of a row held per thread (`row`, a var<private>) and a row of a workgroup tile at element `base`. */
const dot = (row: string, tile: string, base: string) => `dot_${row}_${tile}(${base})`;
function dotFn(L: Lanes, row: string, tile: string): string {
  return `fn dot_${row}_${tile}(base : i32) -> f32 {
  var s = 0.0;
  for (var d = 0; d < u.width; d++) { s += ${L.dot(`${row}[d]`, `${tile}[base + d]`)}; }
  return s;
}`;
}

/**
 * The forward (`grad` false) or the dQ kernel (`grad` true): a thread per query row, key/value tiles of `keyTile`
 * keys through workgroup memory, up to the last key of the workgroup's last row.
 */
function rowsWgsl(hd: number, grad: boolean): string {
  const L = lanesOf(hd);
  const n = L.n;
  const keyTile = tileRows(2 * hd);
  const wg = ROWS_PER_WORKGROUP;
  const bindings = grad
    ? `@group(0) @binding(0) var<storage, read_write> dq : array<${L.t}>;
@group(0) @binding(1) var<storage, read> q : array<${L.t}>;
@group(0) @binding(2) var<storage, read> k : array<${L.t}>;
@group(0) @binding(3) var<storage, read> v : array<${L.t}>;
@group(0) @binding(4) var<storage, read> y : array<${L.t}>;
@group(0) @binding(5) var<storage, read> lse : array<f32>;
@group(0) @binding(6) var<storage, read> dy : array<${L.t}>;
@group(0) @binding(7) var<storage, read_write> dsum : array<f32>;
@group(0) @binding(8) var<uniform> u : U;`
    : `@group(0) @binding(0) var<storage, read_write> y : array<${L.t}>;
@group(0) @binding(1) var<storage, read> q : array<${L.t}>;
@group(0) @binding(2) var<storage, read> k : array<${L.t}>;
@group(0) @binding(3) var<storage, read> v : array<${L.t}>;
@group(0) @binding(4) var<storage, read_write> lse : array<f32>;
@group(0) @binding(5) var<uniform> u : U;`;
  // Per row: the forward keeps a running max m and sum l and rescales its accumulator when m grows; the dQ kernel
  // knows the final logsumexp, so each probability is exact at once.
  const start = grad
    ? `var yd = 0.0;
  for (var d = 0; d < u.width; d++) { dyr[d] = dy[qOff + d]; yd += ${L.dot('dyr[d]', 'y[qOff + d]')}; }
  let L = lse[rowIndex];
  if (live) { dsum[rowIndex] = yd; }`
    : `var m = -3.0e38; // below any score: exp(m − score) is 0
  var l = 0.0;`;
  const tile = grad
    ? `for (var c = 0; c < visible; c++) {
        let p = exp(${dot('qr', 'Ks', `c * ${n}`)} - L);
        s[c] = p * (${dot('dyr', 'Vs', `c * ${n}`)} - yd);
      }
      for (var d = 0; d < u.width; d++) {
        var a = acc[d];
        for (var c = 0; c < visible; c++) { a = fma(${L.t}(s[c]), Ks[c * ${n} + d], a); }
        acc[d] = a;
      }`
    : `var mt = m;
      for (var c = 0; c < visible; c++) { s[c] = ${dot('qr', 'Ks', `c * ${n}`)}; mt = max(mt, s[c]); }
      let alpha = exp(m - mt);
      var lt = 0.0;
      for (var c = 0; c < visible; c++) { s[c] = exp(s[c] - mt); lt += s[c]; }
      l = fma(l, alpha, lt);
      m = mt;
      for (var d = 0; d < u.width; d++) {
        var a = acc[d] * alpha;
        for (var c = 0; c < visible; c++) { a = fma(${L.t}(s[c]), Vs[c * ${n} + d], a); }
        acc[d] = a;
      }`;
  const finish = grad
    ? `for (var d = 0; d < u.width; d++) { dq[qOff + d] = acc[d]; }`
    : `let inv = 1.0 / l;
    for (var d = 0; d < u.width; d++) { y[qOff + d] = acc[d] * inv; }
    lse[rowIndex] = m + log(l);`;
  return `${UNIFORMS}
${bindings}
var<workgroup> Ks : array<${L.t}, ${keyTile * n}>;
var<workgroup> Vs : array<${L.t}, ${keyTile * n}>;
var<private> qr : array<${L.t}, ${n}>;
${grad ? `var<private> dyr : array<${L.t}, ${n}>;` : ''}
${dotFn(L, 'qr', 'Ks')}
${grad ? dotFn(L, 'dyr', 'Vs') : ''}

@compute @workgroup_size(${wg}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let wgi = i32(wid.y * nwg.x + wid.x);
  if (wgi >= u.groups * u.tiles) { return; }
  let grp = wgi / u.tiles;
  let row0 = (wgi % u.tiles) * ${wg};
  let row = row0 + i32(li);
  let live = row < u.rows;
  let own = min(row, u.rows - 1); // a thread past the last row loads tiles with the others and writes nothing
  let pos = u.queryOffset + own / u.rep;
  // Keys [0, keyEnd) are seen by some row of this workgroup: its last row's position and those before.
  let keyEnd = u.queryOffset + (min(row0 + ${wg}, u.rows) - 1) / u.rep + 1;
  let rowIndex = grp * u.rows + own;
  let qOff = rowIndex * ${n};
  let kOff = grp * u.keys * ${n};
  for (var d = 0; d < u.width; d++) { qr[d] = q[qOff + d]; }
  var acc : array<${L.t}, ${n}>;
  var s : array<f32, ${keyTile}>; // per tile key: the score, then its probability (forward) or dS (dQ)
  ${start}
  for (var k0 = 0; k0 < keyEnd; k0 += ${keyTile}) {
    let count = min(${keyTile}, keyEnd - k0) * ${n};
    for (var e = i32(li); e < count; e += ${wg}) {
      Ks[e] = k[kOff + k0 * ${n} + e];
      Vs[e] = v[kOff + k0 * ${n} + e];
    }
    workgroupBarrier();
    let visible = clamp(pos + 1 - k0, 0, ${keyTile}); // keys k0 … pos of this tile (pos < keyEnd)
    if (visible > 0) {
      ${tile}
    }
    workgroupBarrier();
  }
  if (live) {
    ${finish}
  }
}`;
}

/**
 * The dK/dV kernel: a thread per key, tiles of `rowTile` query rows (q, dY, logsumexp, D) through workgroup memory,
 * from the first row whose position reaches the workgroup's first key.
 */
function keysWgsl(hd: number): string {
  const L = lanesOf(hd);
  const n = L.n;
  const rowTile = tileRows(2 * hd + 2);
  const wg = KEYS_PER_WORKGROUP;
  return `${UNIFORMS}
@group(0) @binding(0) var<storage, read_write> dk : array<${L.t}>;
@group(0) @binding(1) var<storage, read> q : array<${L.t}>;
@group(0) @binding(2) var<storage, read> k : array<${L.t}>;
@group(0) @binding(3) var<storage, read> v : array<${L.t}>;
@group(0) @binding(4) var<storage, read> lse : array<f32>;
@group(0) @binding(5) var<storage, read> dy : array<${L.t}>;
@group(0) @binding(6) var<storage, read> dsum : array<f32>;
@group(0) @binding(7) var<storage, read_write> dv : array<${L.t}>;
@group(0) @binding(8) var<uniform> u : U;
var<workgroup> Qs : array<${L.t}, ${rowTile * n}>;
var<workgroup> Gs : array<${L.t}, ${rowTile * n}>;
var<workgroup> Ls : array<f32, ${rowTile}>;
var<workgroup> Ds : array<f32, ${rowTile}>;
var<private> kr : array<${L.t}, ${n}>;
var<private> vr : array<${L.t}, ${n}>;
${dotFn(L, 'kr', 'Qs')}
${dotFn(L, 'vr', 'Gs')}

@compute @workgroup_size(${wg}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let wgi = i32(wid.y * nwg.x + wid.x);
  if (wgi >= u.groups * u.tiles) { return; }
  let grp = wgi / u.tiles;
  let key0 = (wgi % u.tiles) * ${wg};
  let key = key0 + i32(li);
  let live = key < u.keys;
  let kOff = (grp * u.keys + min(key, u.keys - 1)) * ${n};
  for (var d = 0; d < u.width; d++) { kr[d] = k[kOff + d]; vr[d] = v[kOff + d]; }
  var dka : array<${L.t}, ${n}>;
  var dva : array<${L.t}, ${n}>;
  var pr : array<f32, ${rowTile}>; // per tile row: P and dS at this key
  var ds : array<f32, ${rowTile}>;
  // Row of the first query that sees key j: position max(j, queryOffset), rep rows per position.
  let seenFrom = max(key - u.queryOffset, 0) * u.rep;
  let qBase = grp * u.rows;
  for (var r0 = max(key0 - u.queryOffset, 0) * u.rep; r0 < u.rows; r0 += ${rowTile}) {
    let count = min(${rowTile}, u.rows - r0);
    for (var e = i32(li); e < count * ${n}; e += ${wg}) {
      Qs[e] = q[(qBase + r0) * ${n} + e];
      Gs[e] = dy[(qBase + r0) * ${n} + e];
    }
    for (var e = i32(li); e < count; e += ${wg}) {
      Ls[e] = lse[qBase + r0 + e];
      Ds[e] = dsum[qBase + r0 + e];
    }
    workgroupBarrier();
    // This tile's rows that see the key: a suffix (none for a thread past the last key).
    let first = select(count, clamp(seenFrom - r0, 0, count), live);
    for (var i = first; i < count; i++) {
      pr[i] = exp(${dot('kr', 'Qs', `i * ${n}`)} - Ls[i]);
      ds[i] = pr[i] * (${dot('vr', 'Gs', `i * ${n}`)} - Ds[i]);
    }
    for (var d = 0; d < u.width; d++) {
      var a = dva[d];
      var b = dka[d];
      for (var i = first; i < count; i++) {
        a = fma(${L.t}(pr[i]), Gs[i * ${n} + d], a);
        b = fma(${L.t}(ds[i]), Qs[i * ${n} + d], b);
      }
      dva[d] = a;
      dka[d] = b;
    }
    workgroupBarrier();
  }
  if (live) {
    for (var d = 0; d < u.width; d++) { dk[kOff + d] = dka[d]; dv[kOff + d] = dva[d]; }
  }
}`;
}

interface Shape {
  groups: number;
  rows: number;
  keys: number;
  hd: number;
  rep: number;
  queryOffset: number;
}

function shapeOf(q: tf.TensorInfo, k: tf.TensorInfo, v: tf.TensorInfo, queryOffset: number): Shape {
  const [groups, rows, hd] = q.shape;
  const keys = k.shape[1];
  const ok =
    q.shape.length === 3 &&
    k.shape.length === 3 &&
    tf.util.arraysEqual(k.shape, v.shape) &&
    k.shape[0] === groups &&
    k.shape[2] === hd &&
    hd <= MAX_HEAD_DIM &&
    Number.isInteger(queryOffset) &&
    queryOffset >= 0 &&
    queryOffset < keys &&
    rows % (keys - queryOffset) === 0 &&
    [q, k, v].every((t) => t.dtype === 'float32');
  if (!ok) throw new AttentionShapeError(`fused attention wants float32 q [G, (T − offset)·rep, hd ≤ ${MAX_HEAD_DIM}], k and v [G, T, hd]; got ${q.shape}, ${k.shape}, ${v.shape}, offset ${queryOffset}`);
  return { groups, rows, keys, hd, rep: rows / (keys - queryOffset), queryOffset };
}

function uniforms(s: Shape, tiles: number): { i32: number }[] {
  return [s.groups, s.rows, s.keys, s.rep, s.queryOffset, tiles, lanesOf(s.hd).n].map((i32) => ({ i32 }));
}

/** Register both kernels: forward {q, k, v} → [y, logsumexp [G, rows]]; gradient {q, k, v, y, lse, dy} → [dq, dk, dv]. */
export function registerAttention(): void {
  tf.registerKernel({
    kernelName: ATTENTION_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { q, k, v } = inputs as { q: tf.TensorInfo; k: tf.TensorInfo; v: tf.TensorInfo };
      const s = shapeOf(q, k, v, (attrs as { queryOffset: number }).queryOffset);
      const gpu = asWebGpu(backend);
      const tiles = Math.ceil(s.rows / ROWS_PER_WORKGROUP);
      // Refusals (a tensor past the storage binding, a grid past the limit) come before the second output is made.
      for (const t of [q, k]) checkBindable(gpu, t.shape);
      const grid = gridFor(s.groups * tiles);
      const lse = gpu.makeTensorInfo([s.groups, s.rows], 'float32');
      const y = dispatch(gpu, {
        key: `attention-forward-${s.hd}`,
        wgsl: () => rowsWgsl(s.hd, false),
        name: 'AttentionForward',
        inputs: [q, k, v, lse],
        output: { shape: q.shape },
        uniforms: uniforms(s, tiles),
        workgroups: grid,
      });
      attentionStats.forward++;
      return [y, lse];
    },
  });
  tf.registerKernel({
    kernelName: ATTENTION_GRAD_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { q, k, v, y, lse, dy } = inputs as Record<'q' | 'k' | 'v' | 'y' | 'lse' | 'dy', tf.TensorInfo>;
      const s = shapeOf(q, k, v, (attrs as { queryOffset: number }).queryOffset);
      const gpu = asWebGpu(backend);
      const rowTiles = Math.ceil(s.rows / ROWS_PER_WORKGROUP);
      const keyTiles = Math.ceil(s.keys / KEYS_PER_WORKGROUP);
      for (const t of [q, k]) checkBindable(gpu, t.shape);
      const [rowGrid, keyGrid] = [gridFor(s.groups * rowTiles), gridFor(s.groups * keyTiles)];
      const dsum = gpu.makeTensorInfo([s.groups, s.rows], 'float32'); // D = rowsum(dY ⊙ Y), written by the dQ kernel
      const dv = gpu.makeTensorInfo(k.shape, 'float32');
      const dq = dispatch(gpu, {
        key: `attention-dq-${s.hd}`,
        wgsl: () => rowsWgsl(s.hd, true),
        name: 'AttentionGradQ',
        inputs: [q, k, v, y, lse, dy, dsum],
        output: { shape: q.shape },
        uniforms: uniforms(s, rowTiles),
        workgroups: rowGrid,
      });
      const dk = dispatch(gpu, {
        key: `attention-dkv-${s.hd}`,
        wgsl: () => keysWgsl(s.hd),
        name: 'AttentionGradKV',
        inputs: [q, k, v, lse, dy, dsum, dv],
        output: { shape: k.shape },
        uniforms: uniforms(s, keyTiles),
        workgroups: keyGrid,
      });
      gpu.disposeData(dsum.dataId); // released once the queued dispatches that use it are submitted
      attentionStats.backward++;
      return [dq, dk, dv];
    },
  });
}

/** Whether causalAttention's plain causal case runs here: webgpu with these kernels, and a head dim they take. */
export function fusedAttentionRuns(headDim: number): boolean {
  return headDim <= MAX_HEAD_DIM && ourKernelRuns(ATTENTION_KERNEL) && ourKernelRuns(ATTENTION_GRAD_KERNEL);
}

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/**
 * Causal attention over groups with its gradient, q [G, (T − queryOffset)·rep, hd] (pre-scaled), k and v [G, T, hd]
 * → q's shape; queries are positions [queryOffset, T). Webgpu only (see fusedAttentionRuns).
 */
export function fusedCausalAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, queryOffset = 0): tf.Tensor3D {
  const attrs = { queryOffset };
  const f = tf.customGrad(((qIn: tf.Tensor, kIn: tf.Tensor, vIn: tf.Tensor, save: tf.GradSaveFunc) => {
    const [y, lse] = tf.engine().runKernel(ATTENTION_KERNEL, { q: qIn, k: kIn, v: vIn }, attrs) as tf.Tensor[];
    save([qIn, kIn, vIn, y, lse]); // the logsumexp lives on only in the saved copy (none without a gradient)
    return {
      value: y,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [qs, ks, vs, ys, ls] = saved;
        return tf.engine().runKernel(ATTENTION_GRAD_KERNEL, { q: qs, k: ks, v: vs, y: ys, lse: ls, dy }, attrs) as tf.Tensor[];
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(q, k, v) as tf.Tensor3D;
}
