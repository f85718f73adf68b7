/**
 * The core of causal self-attention for training and full forwards: softmax(Q·Kᵀ + causal mask)·V per attention
 * group, with a hand-written gradient, computed in query blocks so that peak memory stays bounded on long sequences.
 *
 * Why it is written this way (wasm backend, measured): 2-D matmuls go to XNNPACK (~25 GFLOP/s) while batched 3-D
 * matmuls and transposed operands take a naive path (~1–2 GFLOP/s; 8 rows × 256 tokens spent most of a training
 * step there). So every product here is a plain 2-D matmul, one attention group at a time, and the gradient is
 * written out (flash-attention style: P is recomputed per block, never stored) so the backward pass needs no
 * transposed or batched matmul either. The per-group operands are cut out and transposed on the host (one download
 * of q, k, v; small uploads): wasm's slice, gather and transpose kernels cost ~0.2–0.6 ms per group, a host copy
 * a few microseconds.
 *
 * Short sequences (a prompt of a few dozen tokens) take one batched op instead: there the per-group loop's op count
 * costs more than the slow kernel's arithmetic. So do backends with fast batched matmuls while the scores fit, and
 * always those that cannot read synchronously (WebGPU under Node): all scores at once, tfjs's own gradient.
 *
 * Layout: a group is one (row of the batch, kv head) pair; its query rows are the rep = H / KVH query heads that
 * share that kv head, ordered position-major (row i·rep + r is position i, head r), so a block of positions is a
 * contiguous block of rows. Queries come pre-scaled by 1/sqrt(hd).
 */
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend } from './backend.ts';

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
function blockMask(t0: number, t1: number, rep: number): Float32Array {
  const key = `${t0}:${t1}:${rep}`;
  let m = maskCache.get(key);
  if (!m) {
    m = new Float32Array((t1 - t0) * rep * t1);
    for (let i = t0; i < t1; i++) {
      for (let r = 0; r < rep; r++) {
        const row = ((i - t0) * rep + r) * t1;
        for (let j = i + 1; j < t1; j++) m[row + j] = -1e9; // -1e9 rather than -inf keeps softmax NaN-free
      }
    }
    if (maskCache.size >= 64) maskCache.clear(); // long sequences have many blocks: keep the cache small
    maskCache.set(key, m);
  }
  return m;
}

interface Block {
  t0: number;
  t1: number;
}

function blocksOf(t: number, blockSize: number): Block[] {
  const out: Block[] = [];
  for (let t0 = 0; t0 < t; t0 += blockSize) out.push({ t0, t1: Math.min(t, t0 + blockSize) });
  return out;
}

/** Rows [r0, r1) of a row-major [*, cols] host array as a tensor [r1 − r0, cols]. */
function rowsTensor(data: Float32Array, r0: number, r1: number, cols: number): tf.Tensor2D {
  return tf.tensor2d(data.subarray(r0 * cols, r1 * cols), [r1 - r0, cols]);
}

/** Rows [r0, r1) of a row-major [*, cols] host array, transposed: [cols, r1 − r0]. */
function rowsTransposed(data: Float32Array, r0: number, r1: number, cols: number): tf.Tensor2D {
  const n = r1 - r0;
  const out = new Float32Array(n * cols);
  for (let r = 0; r < n; r++) {
    const src = (r0 + r) * cols;
    for (let c = 0; c < cols; c++) out[c * n + r] = data[src + c];
  }
  return tf.tensor2d(out, [cols, n]);
}

/** softmax(q·kᵀ + mask) for one block, q [rows, hd] and kT [hd, keys] → [rows, keys] (wasm's fused softmax kernel). */
function blockProbs(q: tf.Tensor2D, kT: tf.Tensor2D, blk: Block, rep: number): tf.Tensor2D {
  const mask = tf.tensor2d(blockMask(blk.t0, blk.t1, rep), [(blk.t1 - blk.t0) * rep, blk.t1]);
  return tf.softmax(tf.add(tf.matMul(q, kT), mask)) as tf.Tensor2D;
}

/**
 * Causal attention over groups: q [G, T·rep, hd] (pre-scaled), k and v [G, T, hd] → [G, T·rep, hd].
 * `blockSize` (positions per query block) defaults to what fits the score budget; tests force small blocks.
 */
export function causalAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, blockSize?: number): tf.Tensor3D {
  const [g, tr, hd] = q.shape;
  const t = k.shape[1];
  // Backends that cannot read synchronously (WebGPU) never take the per-group loop: it reads q, k, v to the host.
  if (!readsSyncOnActiveBackend()) return batchedAttention(q, k, v);
  if (blockSize === undefined) {
    if (tr * t * hd <= SMALL_GROUP_WORK) return batchedAttention(q, k, v);
    // Backends with fast batched matmuls (GPU, libtensorflow) keep one op while all scores fit a few blocks' budget.
    if (!HOST_LOOP_BACKENDS.has(tf.getBackend()) && g * tr * t <= 16 * SCORE_BUDGET) return batchedAttention(q, k, v);
  }
  return groupedAttention(q, k, v, blocksOf(t, blockSize ?? attentionBlockSize(t, tr / t)));
}

/** Backends whose batched/transposed matmuls are slow, so the per-group loop of 2-D matmuls pays. */
const HOST_LOOP_BACKENDS = new Set(['wasm', 'cpu']);

/**
 * Multiply-adds per group (rows × keys × hd) up to which one batched (3-D) op per step beats a loop of 2-D matmuls:
 * at a few dozen positions (a short prompt's prefill) the loop's ~10 ops per group cost more than the slow kernel.
 */
const SMALL_GROUP_WORK = 1 << 16;

/** All groups at once with batched matmuls and tfjs's own gradients (for short sequences only, see above). */
function batchedAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D): tf.Tensor3D {
  const [, tr] = q.shape;
  const t = k.shape[1];
  const mask = tf.tensor2d(blockMask(0, t, tr / t), [tr, t]);
  return tf.matMul(tf.softmax(tf.add(tf.matMul(q, k, false, true), mask)), v);
}

function groupedAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, blocks: Block[]): tf.Tensor3D {
  const [g, tr, hd] = q.shape;
  const t = k.shape[1];
  const rep = tr / t;
  const f = tf.customGrad(((qIn: tf.Tensor, kIn: tf.Tensor, vIn: tf.Tensor, save: tf.GradSaveFunc) => {
    const qd = qIn.dataSync() as Float32Array;
    const kd = kIn.dataSync() as Float32Array;
    const vd = vIn.dataSync() as Float32Array;
    const out: tf.Tensor2D[] = [];
    for (let gi = 0; gi < g; gi++) {
      for (const blk of blocks) {
        // One tidy per block: its score-sized temporaries are freed before the next block (bounded memory).
        out.push(
          tf.tidy(() => {
            const qb = rowsTensor(qd, gi * tr + blk.t0 * rep, gi * tr + blk.t1 * rep, hd); // [rows, hd]
            const kT = rowsTransposed(kd, gi * t, gi * t + blk.t1, hd); // [hd, keys]
            return tf.matMul(blockProbs(qb, kT, blk, rep), rowsTensor(vd, gi * t, gi * t + blk.t1, hd)); // [rows, hd]
          }),
        );
      }
    }
    const y = tf.reshape(out.length === 1 ? out[0] : tf.concat(out, 0), [g, tr, hd]);
    save([qIn, kIn, vIn, y]);
    return { value: y, gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => attentionGrad(dy, saved, blocks, rep) };
  }) as unknown as CustomGradientFunc);
  return f(q, k, v) as tf.Tensor3D;
}

/**
 * Gradient per block, P recomputed (never stored): dP = dY·Vᵀ, dS = P ⊙ (dP − rowsum(dY ⊙ Y)), dQ = dS·K,
 * dKᵀ = Qᵀ·dS, dVᵀ = dYᵀ·P — plain 2-D matmuls on host-transposed operands. dK and dV add up on the host over the
 * blocks of a group (a block touches keys [0, t1) only).
 */
function attentionGrad(dy: tf.Tensor, saved: tf.Tensor[], blocks: Block[], rep: number): tf.Tensor[] {
  const [qIn, kIn, vIn, yIn] = saved;
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
  for (let gi = 0; gi < g; gi++) {
    for (const blk of blocks) {
      const r0 = gi * tr + blk.t0 * rep;
      const r1 = gi * tr + blk.t1 * rep;
      const keys = blk.t1;
      const [dqb, dkT, dvT] = tf.tidy(() => {
        const kT = rowsTransposed(kd, gi * t, gi * t + keys, hd); // [hd, keys]
        const p = blockProbs(rowsTensor(qd, r0, r1, hd), kT, blk, rep); // [rows, keys]
        const dp = tf.matMul(rowsTensor(dyd, r0, r1, hd), rowsTransposed(vd, gi * t, gi * t + keys, hd)); // [rows, keys]
        const ds = tf.mul(p, tf.sub(dp, tf.tensor2d(rowSums.subarray(r0, r1), [r1 - r0, 1]))) as tf.Tensor2D; // [rows, keys]
        return [
          tf.matMul(ds, rowsTensor(kd, gi * t, gi * t + keys, hd)), // dQ [rows, hd]
          tf.matMul(rowsTransposed(qd, r0, r1, hd), ds), // dKᵀ [hd, keys]
          tf.matMul(rowsTransposed(dyd, r0, r1, hd), p), // dVᵀ [hd, keys]
        ];
      });
      dq.set(dqb.dataSync() as Float32Array, r0 * hd);
      addTransposed(dkT.dataSync() as Float32Array, hd, keys, dk, gi * t * hd);
      addTransposed(dvT.dataSync() as Float32Array, hd, keys, dv, gi * t * hd);
      tf.dispose([dqb, dkT, dvT]);
    }
  }
  return [tf.tensor3d(dq, [g, tr, hd]), tf.tensor3d(dk, [g, t, hd]), tf.tensor3d(dv, [g, t, hd])];
}

/** out[offset + j·rows + i] += src[i·cols + j]: add a [rows, cols] matrix, transposed, into a [cols, rows] region. */
function addTransposed(src: Float32Array, rows: number, cols: number, out: Float32Array, offset: number): void {
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) out[offset + j * rows + i] += src[i * cols + j];
  }
}
