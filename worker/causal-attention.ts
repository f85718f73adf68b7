/**
 * The core of causal self-attention for training and full forwards: softmax(Q·Kᵀ + causal mask)·V per attention
 * group, with a hand-written gradient, computed in query blocks so that peak memory stays bounded on long sequences.
 *
 * Why it is written this way (wasm backend, measured): 2-D matmuls go to XNNPACK (~25 GFLOP/s) while batched 3-D
 * matmuls and transposed operands take a naive path (~1–2 GFLOP/s; 8 rows × 256 tokens spent most of a training
 * step there). So every product here is a plain 2-D matmul, one attention group at a time, and the gradient is
 * written out (flash-attention style: P is recomputed per block, unless the forward could keep it within a memory
 * bound: KEEP_PROBS_UNTIL_BYTES) so the backward pass needs no transposed or batched matmul either. The per-group
 * operands are cut out and transposed on the host (one download of q, k, v; small uploads): wasm's slice, gather
 * and transpose kernels cost ~0.2–0.6 ms per group, a host copy a few microseconds.
 *
 * Short sequences (a prompt of a few dozen tokens) take one batched op instead: there the per-group loop's op count
 * costs more than the slow kernel's arithmetic. So do backends with fast batched matmuls while the scores fit, and
 * always those that cannot read synchronously (WebGPU under Node): all scores at once, tfjs's own gradient. On webgpu
 * fused kernels run instead, causal and tree alike (worker/webgpu/attention.ts: flash attention, forward and
 * gradient, no score-sized tensor).
 *
 * Layout: a group is one (row of the batch, kv head) pair; its query rows are the rep = H / KVH query heads that
 * share that kv head, ordered position-major (row i·rep + r is position i, head r), so a block of positions is a
 * contiguous block of rows. Queries come pre-scaled by 1/sqrt(hd).
 *
 * Tree attention (worker/prefix-tree.ts): a packed prefix tree is one sequence in depth-first order in which each
 * position sees its ancestors and itself. A query block's keys are the union of its queries' ancestors — a few
 * contiguous ranges — gathered on the host like the causal block's [0, t1), so keys no query of the block sees are
 * never multiplied; the mask hides the rest. Causal attention is the one-chain case of the same code.
 *
 * Queries behind a trunk (worker/trunk.ts): the keys may start with positions that have no query here — a trunk
 * computed once for several micro-batches, its keys and values prepended — so queries are positions
 * [queryOffset, T) of the T key positions. Blocks then start at queryOffset and index their query rows from it.
 */
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend } from './backend.ts';
import { ancestorRanges, type PositionRange, type TreeLayout } from './prefix-tree.ts';
import { fusedAttentionRuns, fusedCausalAttention } from './webgpu/attention.ts';

/** Score elements (block rows × keys) one block may hold: 4M floats = 16 MB per score matrix. */
const SCORE_BUDGET = 1 << 22;

/** tf.customGrad's function type (not exported by @tensorflow/tfjs). */
type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** Positions per query block for a sequence of `t` positions: the whole sequence when its scores fit the budget. */
export function attentionBlockSize(t: number, rep: number): number {
  return Math.max(1, Math.min(t, Math.floor(SCORE_BUDGET / (rep * t))));
}

/** Additive causal mask for query positions [t0, t1) × rep heads against keys [0, t1): [(t1 − t0)·rep, t1]. */
const maskCache = new Map<string, Float32Array>();
function causalMask(t0: number, t1: number, rep: number): Float32Array {
  const key = `${t0}:${t1}:${rep}`;
  let m = maskCache.get(key);
  if (!m) {
    m = new Float32Array((t1 - t0) * rep * t1);
    for (let i = t0; i < t1; i++) {
      for (let r = 0; r < rep; r++) {
        const row = ((i - t0) * rep + r) * t1;
        for (let j = i + 1; j < t1; j++) m[row + j] = HIDDEN;
      }
    }
    if (maskCache.size >= 64) maskCache.clear(); // long sequences have many blocks: keep the cache small
    maskCache.set(key, m);
  }
  return m;
}

/** The additive mask value of a key a query does not see: -1e9 rather than -inf keeps softmax NaN-free. */
const HIDDEN = -1e9;

/**
 * A query block: positions [t0, t1), the keys they may see as ascending disjoint ranges (causal: [0, t1); tree: the
 * union of the queries' ancestors, so blocks of keys no query sees are never computed), and the additive mask
 * [(t1 − t0)·rep, keyCount] over those keys.
 */
interface Block {
  t0: number;
  t1: number;
  keys: PositionRange[];
  keyCount: number;
  mask: () => Float32Array;
}

function causalBlocks(t: number, blockSize: number, rep: number, from: number): Block[] {
  const out: Block[] = [];
  for (let t0 = from; t0 < t; t0 += blockSize) {
    const t1 = Math.min(t, t0 + blockSize);
    out.push({ t0, t1, keys: [{ start: 0, end: t1 }], keyCount: t1, mask: () => causalMask(t0, t1, rep) });
  }
  return out;
}

/** Keys of a tree block: the union of its queries' ancestor ranges, ascending and disjoint. */
function unionOfAncestors(layout: TreeLayout, t0: number, t1: number): PositionRange[] {
  const all: PositionRange[] = [];
  // Queries of one chain share their ancestors up to themselves: the last query of each chain in the block covers it.
  for (let i = t0; i < t1; i++) if (i + 1 === t1 || layout.chainStart[i + 1] !== layout.chainStart[i]) all.push(...ancestorRanges(layout, i));
  all.sort((a, b) => a.start - b.start);
  const merged: PositionRange[] = [];
  for (const r of all) {
    const last = merged[merged.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else merged.push({ ...r });
  }
  return merged;
}

function treeBlock(layout: TreeLayout, t0: number, t1: number, rep: number): Block {
  const keys = unionOfAncestors(layout, t0, t1);
  const keyCount = keys.reduce((a, r) => a + r.end - r.start, 0);
  const column = (position: number): number => {
    let offset = 0;
    for (const r of keys) {
      if (position < r.end) return offset + position - r.start;
      offset += r.end - r.start;
    }
    throw new RangeError(`position ${position} is not among the block's keys`);
  };
  return {
    t0,
    t1,
    keys,
    keyCount,
    mask: () => {
      const m = new Float32Array((t1 - t0) * rep * keyCount).fill(HIDDEN);
      for (let i = t0; i < t1; i++) {
        for (const r of ancestorRanges(layout, i)) {
          const c0 = column(r.start);
          for (let h = 0; h < rep; h++) m.fill(0, ((i - t0) * rep + h) * keyCount + c0, ((i - t0) * rep + h) * keyCount + c0 + r.end - r.start);
        }
      }
      return m;
    },
  };
}

/**
 * Tree query blocks over positions [from, T): chains (a run of first children, contiguous in depth-first order) cut
 * to at most `blockSize` positions, and consecutive pieces joined while the joined block costs little more than the
 * pieces apart — two sibling branches in one block both see each other's keys (masked), which is arithmetic spent
 * for nothing, but a block per few-token piece costs ~10 ops per attention group.
 */
function treeBlocks(layout: TreeLayout, blockSize: number, rep: number, from: number): Block[] {
  const t = layout.parent.length;
  const pieces: { t0: number; t1: number }[] = [];
  for (let t0 = from; t0 < t; ) {
    let t1 = t0 + 1;
    while (t1 < t && t1 - t0 < blockSize && layout.chainStart[t1] === layout.chainStart[t0]) t1++;
    pieces.push({ t0, t1 });
    t0 = t1;
  }
  const cost = (b: Block) => (b.t1 - b.t0) * b.keyCount;
  const blocks: Block[] = [];
  for (const piece of pieces) {
    const alone = treeBlock(layout, piece.t0, piece.t1, rep);
    const last = blocks[blocks.length - 1];
    if (last && piece.t1 - last.t0 <= blockSize) {
      const joined = treeBlock(layout, last.t0, piece.t1, rep);
      const small = piece.t1 - piece.t0 < SMALL_PIECE || last.t1 - last.t0 < SMALL_PIECE;
      if (joined.keyCount * (joined.t1 - joined.t0) * rep <= SCORE_BUDGET && (small || cost(joined) <= JOIN_SLACK * (cost(last) + cost(alone)))) {
        blocks[blocks.length - 1] = joined;
        continue;
      }
    }
    blocks.push(alone);
  }
  return blocks;
}

/** Pieces shorter than this join their neighbour whatever the masked arithmetic: the per-block op count dominates. */
const SMALL_PIECE = 32;
/** A join may cost up to this factor of the pieces' arithmetic apart (the per-block op count it saves pays for it). */
const JOIN_SLACK = 1.25;

/** Tree blocks are planned once per layout and reused by every layer, forward and backward. */
const plannedTreeBlocks = new WeakMap<TreeLayout, Map<string, Block[]>>();
function treeBlocksOf(layout: TreeLayout, blockSize: number, rep: number, from: number): Block[] {
  let byShape = plannedTreeBlocks.get(layout);
  if (!byShape) plannedTreeBlocks.set(layout, (byShape = new Map()));
  const key = `${blockSize}:${rep}:${from}`;
  let blocks = byShape.get(key);
  if (!blocks) {
    // Masks are built on first use and kept with the plan: every layer and the backward pass reuse them.
    blocks = treeBlocks(layout, blockSize, rep, from).map((b) => {
      let mask: Float32Array | null = null;
      return { ...b, mask: () => (mask ??= b.mask()) };
    });
    byShape.set(key, blocks);
  }
  return blocks;
}

/** Rows [r0, r1) of a row-major [*, cols] host array as a tensor [r1 − r0, cols]. */
function rowsTensor(data: Float32Array, r0: number, r1: number, cols: number): tf.Tensor2D {
  return tf.tensor2d(data.subarray(r0 * cols, r1 * cols), [r1 - r0, cols]);
}

/** The rows of `ranges` (offset by `base`) of a row-major [*, cols] host array, stacked: [Σ lengths, cols]. */
function keyRows(data: Float32Array, base: number, ranges: PositionRange[], count: number, cols: number): tf.Tensor2D {
  if (ranges.length === 1) return rowsTensor(data, base + ranges[0].start, base + ranges[0].end, cols);
  const out = new Float32Array(count * cols);
  let row = 0;
  for (const r of ranges) {
    out.set(data.subarray((base + r.start) * cols, (base + r.end) * cols), row * cols);
    row += r.end - r.start;
  }
  return tf.tensor2d(out, [count, cols]);
}

/** The rows of `ranges` (offset by `base`), stacked and transposed: [cols, Σ lengths]. */
function keyRowsTransposed(data: Float32Array, base: number, ranges: PositionRange[], count: number, cols: number): tf.Tensor2D {
  const out = new Float32Array(count * cols);
  let n = 0;
  for (const r of ranges) {
    for (let p = r.start; p < r.end; p++, n++) {
      const src = (base + p) * cols;
      for (let c = 0; c < cols; c++) out[c * count + n] = data[src + c];
    }
  }
  return tf.tensor2d(out, [cols, count]);
}

/** softmax(q·kᵀ + mask) for one block, q [rows, hd] and kT [hd, keys] → [rows, keys] (wasm's fused softmax kernel). */
function blockProbs(q: tf.Tensor2D, kT: tf.Tensor2D, blk: Block, rep: number): tf.Tensor2D {
  const mask = tf.tensor2d(blk.mask(), [(blk.t1 - blk.t0) * rep, blk.keyCount]);
  return tf.softmax(tf.add(tf.matMul(q, kT), mask)) as tf.Tensor2D;
}

/**
 * Attention over groups: q [G, (T − queryOffset)·rep, hd] (pre-scaled), k and v [G, T, hd] → q's shape. Causal by
 * default; with a tree `layout` (worker/prefix-tree.ts, one packed sequence of T positions per group row) each
 * position sees its ancestors and itself only. The queries are positions [queryOffset, T): the keys before them are
 * a trunk's (see the module comment). `blockSize` (positions per query block) defaults to what fits the score
 * budget; tests force small blocks.
 */
export function causalAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, blockSize?: number, layout: TreeLayout | null = null, queryOffset = 0): tf.Tensor3D {
  const [g, tr, hd] = q.shape;
  const t = k.shape[1];
  if (layout && layout.parent.length !== t) throw new RangeError(`tree layout of ${layout.parent.length} positions for a sequence of ${t}`);
  if (!(queryOffset >= 0 && queryOffset < t) || tr % (t - queryOffset) !== 0) throw new RangeError(`${tr} query rows do not fit positions ${queryOffset}..${t - 1}`);
  if (fusedAttentionRuns(hd)) return fusedCausalAttention(q, k, v, queryOffset, layout);
  // Backends that cannot read synchronously (WebGPU) never take the per-group loop: it reads q, k, v to the host.
  if (!readsSyncOnActiveBackend()) return batchedAttention(q, k, v, layout, queryOffset);
  if (blockSize === undefined) {
    if (tr * t * hd <= SMALL_GROUP_WORK) return batchedAttention(q, k, v, layout, queryOffset);
    // Backends with fast batched matmuls (GPU, libtensorflow) keep one op while all scores fit a few blocks' budget.
    if (!HOST_LOOP_BACKENDS.has(tf.getBackend()) && g * tr * t <= 16 * SCORE_BUDGET) return batchedAttention(q, k, v, layout, queryOffset);
  }
  const rep = tr / (t - queryOffset);
  const size = blockSize ?? attentionBlockSize(t, rep);
  return groupedAttention(q, k, v, layout ? treeBlocksOf(layout, size, rep, queryOffset) : causalBlocks(t, size, rep, queryOffset), queryOffset);
}

/** Backends whose batched/transposed matmuls are slow, so the per-group loop of 2-D matmuls pays. */
const HOST_LOOP_BACKENDS = new Set(['wasm', 'cpu']);

/**
 * Multiply-adds per group (rows × keys × hd) up to which one batched (3-D) op per step beats a loop of 2-D matmuls:
 * at a few dozen positions (a short prompt's prefill) the loop's ~10 ops per group cost more than the slow kernel.
 */
const SMALL_GROUP_WORK = 1 << 16;

/** All groups at once with batched matmuls and tfjs's own gradients (for short sequences only, see above). */
function batchedAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, layout: TreeLayout | null, queryOffset: number): tf.Tensor3D {
  const [, tr] = q.shape;
  const t = k.shape[1];
  const rep = tr / (t - queryOffset);
  const mask = layout ? treeBlock(layout, queryOffset, t, rep).mask() : causalMask(queryOffset, t, rep);
  return tf.matMul(tf.softmax(tf.add(tf.matMul(q, k, false, true), tf.tensor2d(mask, [tr, t]))), v);
}

/** Query row of position `p` within its group: queries start at `queryOffset`, rep rows per position. */
const queryRow = (p: number, queryOffset: number, rep: number) => (p - queryOffset) * rep;

/**
 * Whether the op running now is being recorded for a gradient: inside a customGrad's forward the engine counts one
 * kernel level (its own), and the tape records it when some gradient scope is open.
 */
function recordingForGradient(): boolean {
  const state = tf.engine().state;
  return state.gradientDepth > 0 && state.kernelDepth === 1;
}

/**
 * Tensor bytes (the backend's total) up to which a forward that a gradient will follow keeps its blocks'
 * probabilities for the backward, which then skips recomputing them (the scores' matmul, the mask and the softmax:
 * ~20% of a block's forward and backward, measured at 972 × 2,755 on wasm). Past it the backward recomputes them,
 * one block at a time, as flash attention does. The bound is on everything the backend holds because wasm's memory
 * grows and never shrinks: a large model is already past it and keeps nothing, a small one keeps a few hundred MB
 * at most (the merge bench's tree step peaked at ~460 MB of tensors against ~310 MB recomputing on 8 × 25 turns,
 * 2 layers × 2 kv heads × ~13.7M scores per micro-batch, and at ~600 MB against ~350 MB on 8 × 50; a bound of
 * 256 MB kept less and saved about half as much there).
 */
const KEEP_PROBS_UNTIL_BYTES = 512 * 2 ** 20;
let keepProbsUntilBytes = KEEP_PROBS_UNTIL_BYTES;

/** Sets the bound above (0: every backward recomputes its probabilities; tests take both paths); returns the previous one. */
export function setKeepProbsUntilBytes(bytes: number): number {
  const previous = keepProbsUntilBytes;
  keepProbsUntilBytes = bytes;
  return previous;
}

function groupedAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, blocks: Block[], queryOffset: number): tf.Tensor3D {
  const [g, tr, hd] = q.shape;
  const t = k.shape[1];
  const rep = tr / (t - queryOffset);
  const f = tf.customGrad(((qIn: tf.Tensor, kIn: tf.Tensor, vIn: tf.Tensor, save: tf.GradSaveFunc) => {
    const qd = qIn.dataSync() as Float32Array;
    const kd = kIn.dataSync() as Float32Array;
    const vd = vIn.dataSync() as Float32Array;
    const recording = recordingForGradient();
    const out: tf.Tensor2D[] = [];
    /** Probabilities kept for the backward, and per (group, block) in loop order their index there (−1: recompute). */
    const kept: tf.Tensor2D[] = [];
    const keptIndex: number[] = [];
    for (let gi = 0; gi < g; gi++) {
      for (const blk of blocks) {
        const keep = recording && tf.memory().numBytes + 4 * (blk.t1 - blk.t0) * rep * blk.keyCount <= keepProbsUntilBytes;
        // One tidy per block: its score-sized temporaries are freed before the next block (bounded memory).
        const [yb, p] = tf.tidy((): tf.Tensor2D[] => {
          const qb = rowsTensor(qd, gi * tr + queryRow(blk.t0, queryOffset, rep), gi * tr + queryRow(blk.t1, queryOffset, rep), hd); // [rows, hd]
          const kT = keyRowsTransposed(kd, gi * t, blk.keys, blk.keyCount, hd); // [hd, keys]
          const probs = blockProbs(qb, kT, blk, rep); // [rows, keys]
          const yb = tf.matMul(probs, keyRows(vd, gi * t, blk.keys, blk.keyCount, hd)) as tf.Tensor2D; // [rows, hd]
          return keep ? [yb, probs] : [yb];
        });
        out.push(yb);
        keptIndex.push(p ? kept.push(p) - 1 : -1);
      }
    }
    const y = tf.reshape(out.length === 1 ? out[0] : tf.concat(out, 0), [g, tr, hd]);
    // The saved copies share the probabilities' data; this forward's scope frees its own handles.
    save([qIn, kIn, vIn, y, ...kept]);
    return { value: y, gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => attentionGrad(dy, saved, blocks, rep, queryOffset, keptIndex) };
  }) as unknown as CustomGradientFunc);
  return f(q, k, v) as tf.Tensor3D;
}

/**
 * Gradient per block, P as the forward kept it or recomputed: dP = dY·Vᵀ, dS = P ⊙ (dP − rowsum(dY ⊙ Y)), dQ = dS·K,
 * dK = dSᵀ·Q, dV = Pᵀ·dY — plain 2-D matmuls on host-transposed operands, and dS and P transposed on the device:
 * wasm packs a matmul's right operand afresh for every new tensor, and packing a score-sized one (as in Qᵀ·dS)
 * costs several times the transpose plus a product whose right operand is [rows, hd] (measured: ~135 ms against
 * ~35 ms at 832 rows × 2,161 keys). dK and dV add up on the host over the blocks of a group, each block into its
 * own keys' rows.
 */
function attentionGrad(dy: tf.Tensor, saved: tf.Tensor[], blocks: Block[], rep: number, queryOffset: number, keptIndex: readonly number[]): tf.Tensor[] {
  const [qIn, kIn, vIn, yIn, ...kept] = saved;
  const [g, tr, hd] = qIn.shape as [number, number, number];
  const t = kIn.shape[1]!;
  const qd = qIn.dataSync() as Float32Array;
  const kd = kIn.dataSync() as Float32Array;
  const vd = vIn.dataSync() as Float32Array;
  const dyd = dy.dataSync() as Float32Array;
  const yd = yIn.dataSync() as Float32Array;
  const rowSums = new Float32Array(g * tr); // rowsum(dP ⊙ P) = rowsum(dY ⊙ Y)
  for (let r = 0; r < g * tr; r++) {
    let sum = 0;
    for (let d = 0; d < hd; d++) sum += dyd[r * hd + d] * yd[r * hd + d];
    rowSums[r] = sum;
  }
  const dq = new Float32Array(g * tr * hd);
  const dk = new Float32Array(g * t * hd);
  const dv = new Float32Array(g * t * hd);
  let run = 0;
  for (let gi = 0; gi < g; gi++) {
    for (const blk of blocks) {
      const keptProbs = keptIndex[run] >= 0 ? (kept[keptIndex[run]] as tf.Tensor2D) : null;
      run++;
      const r0 = gi * tr + queryRow(blk.t0, queryOffset, rep);
      const r1 = gi * tr + queryRow(blk.t1, queryOffset, rep);
      const [dqb, dkb, dvb] = tf.tidy(() => {
        const qb = rowsTensor(qd, r0, r1, hd); // [rows, hd]
        const dyb = rowsTensor(dyd, r0, r1, hd); // [rows, hd]
        const p = keptProbs ?? blockProbs(qb, keyRowsTransposed(kd, gi * t, blk.keys, blk.keyCount, hd), blk, rep); // [rows, keys]
        const dp = tf.matMul(dyb, keyRowsTransposed(vd, gi * t, blk.keys, blk.keyCount, hd)); // [rows, keys]
        const ds = tf.mul(p, tf.sub(dp, tf.tensor2d(rowSums.subarray(r0, r1), [r1 - r0, 1]))) as tf.Tensor2D; // [rows, keys]
        return [
          tf.matMul(ds, keyRows(kd, gi * t, blk.keys, blk.keyCount, hd)), // dQ [rows, hd]
          tf.matMul(tf.transpose(ds), qb), // dK [keys, hd]
          tf.matMul(tf.transpose(p), dyb), // dV [keys, hd]
        ];
      });
      dq.set(dqb.dataSync() as Float32Array, r0 * hd);
      addKeyRows(dkb.dataSync() as Float32Array, hd, blk, dk, gi * t * hd);
      addKeyRows(dvb.dataSync() as Float32Array, hd, blk, dv, gi * t * hd);
      tf.dispose([dqb, dkb, dvb]);
      // A kept block's probabilities are done with: free them now rather than when the whole backward ends.
      keptProbs?.dispose();
    }
  }
  return [tf.tensor3d(dq, [g, tr, hd]), tf.tensor3d(dk, [g, t, hd]), tf.tensor3d(dv, [g, t, hd])];
}

/** Add a block's [keys, hd] gradient into the rows of its keys of a [T, hd] region at `offset`. */
function addKeyRows(src: Float32Array, hd: number, blk: Block, out: Float32Array, offset: number): void {
  let j = 0;
  for (const r of blk.keys) {
    for (let p = r.start; p < r.end; p++, j++) {
      const dst = offset + p * hd;
      for (let i = 0; i < hd; i++) out[dst + i] += src[j * hd + i];
    }
  }
}
