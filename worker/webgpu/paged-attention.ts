/**
 * Decode attention over the paged KV cache (paged-kv-cache.ts) for a whole batch in one dispatch per layer: B
 * sequences, each with its own length and page table, one query position each, grouped-query (rep query heads per
 * kv head), output [B, H, hd]. The same dispatch first writes each sequence's new key and value (its position
 * length − 1) into the pool, so a decode step costs one dispatch per layer for its cache and its attention, where
 * tensor-decode.ts's tf ops cost ~7 per sequence per layer.
 *
 * A workgroup takes one (sequence, kv head): its thread 0…63 writes part of the new key/value row, a
 * storageBarrier makes the write visible to the workgroup, and the rep query rows go to workgroup memory. Keys are
 * then taken in tiles of TILE positions, a thread per key: it looks its page up, keeps the row's pool index and
 * scores it against the rep queries; the workgroup updates each head's running max and sum (online softmax, f32)
 * and every thread folds the tile's values into its share of the rep · hd outputs. Queries are pre-scaled.
 *
 * Bounds: float32; rep · hd small enough that the query rows, the tile's scores and row indices fit WebGPU's
 * guaranteed 16 KiB of workgroup memory (pagedAttentionFits; ≥ Qwen2.5-7B's rep 7 · hd 128); the pool within the
 * device's storage binding (gpu.ts). Not done: splitting a long sequence over several workgroups (flash-decoding):
 * one batch of short contexts leaves most of a GPU idle either way, the step being dispatch-bound; untuned for GPUs.
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, dispatch, GRID_BUILTINS, gridFor, ourKernelRuns, rowLanes, WORKGROUP_FLOATS } from './gpu.ts';
import { PAGE_SLOTS, PAGED_APPEND_KERNEL, pagedStats, PagedKvShapeError } from './paged-kv-cache.ts';

export const PAGED_ATTENTION_KERNEL = 'AgentJetPagedAttention';

/** Threads per workgroup, and keys per tile (a thread per key; a common GPU wave or two). */
const TILE = 64;

/** Workgroup floats: the rep query rows, rep scores per tile key, the tile's row indices, and per head max/sum/rescale. */
const workgroupFloats = (hd: number, rep: number) => rep * hd + rep * TILE + TILE + 3 * rep;

/** Whether the kernel takes this head dim and grouping. */
export function pagedAttentionFits(hd: number, rep: number): boolean {
  return Number.isInteger(rep) && rep >= 1 && hd >= 1 && workgroupFloats(hd, rep) <= WORKGROUP_FLOATS;
}

function attentionWgsl(hd: number, rep: number): string {
  const { t, n, dot } = rowLanes(hd);
  // Outputs (r, d) of the workgroup's rep heads, spread over its threads.
  const perThread = Math.ceil((rep * n) / TILE);
  return `struct U { kvh : i32, width : i32, tableWidth : i32, qStride : i32, kStride : i32, kOff : i32, vStride : i32, vOff : i32, batch : i32, perThread : i32, pad0 : i32, pad1 : i32, };
@group(0) @binding(0) var<storage, read_write> y : array<${t}>;
@group(0) @binding(1) var<storage, read> qs : array<${t}>;
@group(0) @binding(2) var<storage, read> ks : array<${t}>;
@group(0) @binding(3) var<storage, read> vs : array<${t}>;
@group(0) @binding(4) var<storage, read_write> pool : array<${t}>;
@group(0) @binding(5) var<storage, read> table : array<i32>;
@group(0) @binding(6) var<uniform> u : U;
const REP = ${rep};
const SLOTS = ${PAGE_SLOTS};
var<workgroup> Q : array<${t}, ${rep * n}>;
var<workgroup> S : array<f32, ${rep * TILE}>; // per head, per tile key: the score, then exp(score − max)
var<workgroup> rowAt : array<i32, ${TILE}>; // pool index of each tile key's key row
var<workgroup> M : array<f32, ${rep}>; // running max per head
var<workgroup> L : array<f32, ${rep}>; // running sum per head
var<workgroup> A : array<f32, ${rep}>; // this tile's rescale of the earlier sum and output

/** Pool index of the key row of position p of kv head g (the value row is kvh · SLOTS rows later). */
fn keyRow(tb : i32, g : i32, p : i32) -> i32 {
  let page = table[tb + 1 + p / SLOTS];
  return ((page * 2 * u.kvh + g) * SLOTS + p % SLOTS) * u.width;
}

@compute @workgroup_size(${TILE}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let wgi = i32(wid.y * nwg.x + wid.x);
  if (wgi >= u.batch * u.kvh) { return; }
  let b = wgi / u.kvh;
  let g = wgi % u.kvh;
  let li32 = i32(li);
  let tb = b * (1 + u.tableWidth);
  let len = table[tb]; // positions, the new one (len − 1) included
  let vDelta = u.kvh * SLOTS * u.width;
  // The new key and value first: the tiles below read them from the pool like any other position.
  let at = keyRow(tb, g, len - 1);
  for (var e = li32; e < u.width; e += ${TILE}) {
    pool[at + e] = ks[(b * u.kStride + u.kOff + g) * u.width + e];
    pool[at + vDelta + e] = vs[(b * u.vStride + u.vOff + g) * u.width + e];
  }
  let q0 = (b * u.qStride + g * REP) * u.width; // the group's query heads are consecutive
  for (var e = li32; e < REP * u.width; e += ${TILE}) { Q[e] = qs[q0 + e]; }
  if (li32 < REP) {
    M[li32] = -3.0e38; // below any score: exp(M − score) is 0
    L[li32] = 0.0;
  }
  storageBarrier();
  workgroupBarrier();
  var acc : array<${t}, ${perThread}>;
  for (var k0 = 0; k0 < len; k0 += ${TILE}) {
    let count = min(${TILE}, len - k0);
    if (li32 < count) {
      let row = keyRow(tb, g, k0 + li32);
      rowAt[li32] = row;
      for (var r = 0; r < REP; r++) {
        var s = 0.0;
        for (var d = 0; d < u.width; d++) { s += ${dot('Q[r * u.width + d]', 'pool[row + d]')}; }
        S[r * ${TILE} + li32] = s;
      }
    }
    workgroupBarrier();
    if (li32 < REP) {
      var mt = M[li32];
      for (var c = 0; c < count; c++) { mt = max(mt, S[li32 * ${TILE} + c]); }
      A[li32] = exp(M[li32] - mt);
      M[li32] = mt;
    }
    workgroupBarrier();
    for (var e = li32; e < REP * ${TILE}; e += ${TILE}) {
      if (e % ${TILE} < count) { S[e] = exp(S[e] - M[e / ${TILE}]); }
    }
    workgroupBarrier();
    if (li32 < REP) {
      var lt = 0.0;
      for (var c = 0; c < count; c++) { lt += S[li32 * ${TILE} + c]; }
      L[li32] = fma(L[li32], A[li32], lt);
    }
    for (var i = 0; i < u.perThread; i++) {
      let o = li32 + i * ${TILE};
      if (o < REP * u.width) {
        let r = o / u.width;
        let d = o % u.width;
        var a = acc[i] * A[r];
        for (var c = 0; c < count; c++) { a = fma(${t}(S[r * ${TILE} + c]), pool[rowAt[c] + vDelta + d], a); }
        acc[i] = a;
      }
    }
    workgroupBarrier(); // the next tile overwrites S, rowAt and A
  }
  for (var i = 0; i < u.perThread; i++) {
    let o = li32 + i * ${TILE};
    if (o < REP * u.width) { y[(b * u.kvh + g) * REP * u.width + o] = acc[i] / L[o / u.width]; }
  }
}`;
}

export interface PagedAttentionAttrs {
  /** Query heads H (rep = H / KVH); q's rows hold qStride ≥ H heads, the queries first. */
  heads: number;
  /** The new keys: heads kOff… of k's rows (likewise v). */
  kOff: number;
  vOff: number;
}

/**
 * Register the kernel: {q [B, qStride, hd], k [B, kStride, hd], v [B, vStride, hd], pool [pages, 2, KVH, PAGE_SLOTS,
 * hd], table int32 [B, 1 + width]} → y [B, H, hd]. Row b of the table is [length, pages…] with the new position
 * (length − 1) reserved; it is written from k and v, then attended with the others.
 */
export function registerPagedAttention(): void {
  tf.registerKernel({
    kernelName: PAGED_ATTENTION_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { q, k, v, pool, table } = inputs as Record<'q' | 'k' | 'v' | 'pool' | 'table', tf.TensorInfo>;
      const a = attrs as unknown as PagedAttentionAttrs;
      const [batch, qStride, hd] = q.shape;
      const kvh = pool.shape[2];
      const rep = a.heads / kvh;
      const ok =
        q.shape.length === 3 &&
        k.shape.length === 3 &&
        v.shape.length === 3 &&
        pool.shape.length === 5 &&
        pool.shape[1] === 2 &&
        pool.shape[3] === PAGE_SLOTS &&
        pool.shape[4] === hd &&
        k.shape[0] === batch &&
        v.shape[0] === batch &&
        k.shape[2] === hd &&
        v.shape[2] === hd &&
        a.heads <= qStride &&
        a.kOff + kvh <= k.shape[1] &&
        a.vOff + kvh <= v.shape[1] &&
        table.shape.length === 2 &&
        table.shape[0] === batch &&
        table.dtype === 'int32' &&
        pagedAttentionFits(hd, rep) &&
        [q, k, v, pool].every((x) => x.dtype === 'float32');
      if (!ok) throw new PagedKvShapeError(`paged attention wants float32 q [B, ≥ H, hd], k and v [B, stride, hd] holding KVH heads from their offsets, a pool [pages, 2, KVH, ${PAGE_SLOTS}, hd], an int32 table [B, 1 + width], H a multiple of KVH with rep · hd within workgroup memory; got ${q.shape}, ${k.shape}, ${v.shape}, ${pool.shape}, ${table.shape} (${JSON.stringify(a)})`);
      const { n } = rowLanes(hd);
      const y = dispatch(asWebGpu(backend), {
        key: `paged-attention-${hd}-${rep}`,
        wgsl: () => attentionWgsl(hd, rep),
        name: 'PagedAttention',
        inputs: [q, k, v, pool, table],
        output: { shape: [batch, a.heads, hd] },
        uniforms: [kvh, n, table.shape[1] - 1, qStride, k.shape[1], a.kOff, v.shape[1], a.vOff, batch, Math.ceil((rep * n) / TILE)].map((i32) => ({ i32 })),
        workgroups: gridFor(batch * kvh),
      });
      pagedStats.attention++;
      return y;
    },
  });
}

/** Whether decoding can take the paged path: webgpu with both kernels, and a head dim and grouping they take. */
export function pagedDecodeRuns(hd: number, rep: number): boolean {
  return pagedAttentionFits(hd, rep) && ourKernelRuns(PAGED_ATTENTION_KERNEL) && ourKernelRuns(PAGED_APPEND_KERNEL);
}

/**
 * Append each sequence's new key/value (k, v heads from kOff, vOff) at its position table[b][0] − 1 and attend its
 * pre-scaled queries (q's first `heads` heads) over its positions: y [B, H, hd]. Webgpu only (see pagedDecodeRuns).
 */
export function pagedAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, pool: tf.Tensor, table: tf.Tensor2D, attrs: PagedAttentionAttrs): tf.Tensor3D {
  return tf.engine().runKernel(PAGED_ATTENTION_KERNEL, { q, k, v, pool, table }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor3D;
}
