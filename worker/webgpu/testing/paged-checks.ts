/**
 * The paged decode checks (paged-kv-cache.ts, paged-attention.ts) as data, for testing/checks.ts: per case, a pool
 * filled by the append kernel with the sequences' pages interleaved, one decode step (append the new keys and values,
 * attend), against plain attention on the cpu backend; and that the step took the paged kernels. The tests
 * (paged-attention.test.ts) and the device script run the same cases.
 *
 * Run with webgpu selected; each check switches to the cpu for its reference and leaves webgpu active.
 */
import * as tf from '@tensorflow/tfjs';
import { pagedAttention } from '../paged-attention.ts';
import { PAGE_SLOTS, pagedAppend, PagedKvPool, type PagedKvSequence, pagedStats } from '../paged-kv-cache.ts';
import type { Check } from './checks.ts';
import { randomArray, worstRatio } from './gpu.ts';

export interface PagedCase {
  lengths: number[];
  kvh: number;
  rep: number;
  hd: number;
  /** Range of the (pre-scaled) queries: larger makes peaked softmaxes. */
  qScale: number;
}

/**
 * Batches of sequences of different lengths (1, odd, over a page, many pages and tiles), grouped queries (rep 1, 2,
 * 7), head dims 8 and 64 (vec4 rows) and 6 (f32 rows), scores large enough that the running max must rescale.
 */
export const PAGED_CASES: PagedCase[] = [
  { lengths: [1, 7, 17], kvh: 2, rep: 1, hd: 8, qScale: 0.5 },
  { lengths: [33, 1, 100, PAGE_SLOTS], kvh: 2, rep: 2, hd: 64, qScale: 0.15 },
  { lengths: [5, 130, 64, 65], kvh: 1, rep: 7, hd: 64, qScale: 0.15 }, // 130: three tiles of keys, nine pages
  { lengths: [3, 20], kvh: 3, rep: 7, hd: 8, qScale: 0.5 },
  { lengths: [9, 40, 1], kvh: 2, rep: 2, hd: 6, qScale: 0.5 }, // rows as f32s
  { lengths: [70, 2], kvh: 2, rep: 2, hd: 8, qScale: 6 }, // scores up to ~±50: the running max rescales
];

export const pagedCaseName = (c: PagedCase) => `paged decode lengths ${c.lengths} KVH ${c.kvh} rep ${c.rep} hd ${c.hd} q ±${c.qScale}`;

/** Seed of the case at `index` (the tests replay a case by it). */
export const pagedSeed = (index: number) => 100 * index + 1;

export type PagedData = { k: Float32Array; v: Float32Array; q: Float32Array }[];

/** Per sequence: keys and values of every position [len, KVH, hd] and its query [H, hd]. */
export function pagedDataOf(c: PagedCase, seed: number): PagedData {
  const row = c.kvh * c.hd;
  return c.lengths.map((len, b) => ({
    k: randomArray(len * row, seed + 10 * b),
    v: randomArray(len * row, seed + 10 * b + 1),
    q: randomArray(c.kvh * c.rep * c.hd, seed + 10 * b + 2, c.qScale),
  }));
}

/** Plain attention on the cpu backend: per sequence, per kv head, softmax(q·Kᵀ)·V for its rep query heads → [H·hd]. */
export async function pagedReference(c: PagedCase, data: PagedData): Promise<Float32Array[]> {
  await tf.setBackend('cpu');
  return data.map(({ k, v, q }, b) =>
    tf.tidy(() => {
      const len = c.lengths[b];
      const keys = tf.transpose(tf.tensor3d(k, [len, c.kvh, c.hd]), [1, 0, 2]); // [KVH, len, hd]
      const values = tf.transpose(tf.tensor3d(v, [len, c.kvh, c.hd]), [1, 0, 2]);
      const p = tf.softmax(tf.matMul(tf.tensor3d(q, [c.kvh, c.rep, c.hd]), keys, false, true));
      return tf.matMul(p, values).dataSync() as Float32Array;
    }),
  );
}

/**
 * Reserve `lengths` a page at a time, round robin over the sequences (so their pages interleave in the pool), write
 * every position but the last with the append kernel.
 */
export function fillPool(pool: PagedKvPool, seqs: PagedKvSequence[], c: PagedCase, data: PagedData): void {
  const most = Math.max(...c.lengths);
  for (let upTo = PAGE_SLOTS; upTo < most + PAGE_SLOTS; upTo += PAGE_SLOTS) {
    pool.reserve(
      seqs,
      c.lengths.map((len) => Math.min(len, upTo)),
    );
  }
  const row = c.kvh * c.hd;
  const slots: number[] = [];
  const k: number[] = [];
  const v: number[] = [];
  seqs.forEach((s, b) => {
    for (let p = 0; p < c.lengths[b] - 1; p++) {
      slots.push(pool.slotOf(s, p));
      k.push(...data[b].k.subarray(p * row, (p + 1) * row));
      v.push(...data[b].v.subarray(p * row, (p + 1) * row));
    }
    s.length = c.lengths[b] - 1;
  });
  if (slots.length === 0) return;
  tf.tidy(() => {
    const rows = slots.length;
    pagedAppend(pool.layers[0], tf.tensor3d(k, [rows, c.kvh, c.hd]), tf.tensor3d(v, [rows, c.kvh, c.hd]), tf.tensor1d(slots, 'int32'), { kStride: c.kvh, kOff: 0, vStride: c.kvh, vOff: 0 });
  });
}

/**
 * The decode step as tensor-decode.ts runs it: one [B, H + 2·KVH, hd] tensor holds each sequence's query, new key
 * and new value (its last position); the kernel appends them and attends → per sequence [H·hd].
 */
export async function pagedDecodeStep(pool: PagedKvPool, seqs: PagedKvSequence[], c: PagedCase, data: PagedData): Promise<Float32Array[]> {
  const h = c.kvh * c.rep;
  const width = h + 2 * c.kvh;
  const row = c.kvh * c.hd;
  const qkv = new Float32Array(seqs.length * width * c.hd);
  data.forEach(({ k, v, q }, b) => {
    const last = c.lengths[b] - 1;
    qkv.set(q, b * width * c.hd);
    qkv.set(k.subarray(last * row, (last + 1) * row), (b * width + h) * c.hd);
    qkv.set(v.subarray(last * row, (last + 1) * row), (b * width + h + c.kvh) * c.hd);
  });
  const lengths = seqs.map((s) => s.length + 1);
  const { table, width: tw } = pool.pageTable(seqs, lengths);
  const y = tf.tidy(() => {
    const all = tf.tensor3d(qkv, [seqs.length, width, c.hd]);
    return pagedAttention(all, all, all, pool.layers[0], tf.tensor2d(table, [seqs.length, 1 + tw], 'int32'), { heads: h, kOff: h, vOff: h + c.kvh });
  });
  const out = (await y.data()) as Float32Array;
  y.dispose();
  seqs.forEach((s) => (s.length += 1));
  return seqs.map((_, b) => out.slice(b * h * c.hd, (b + 1) * h * c.hd));
}

/** f32 sums in another order than the cpu's: outputs are averages of values in [−1, 1]. */
export const PAGED_TOL = { atol: 2e-6, rtol: 1e-5 };

/**
 * One case on webgpu: the outputs against the cpu's (worst over its sequences), and the dispatches (an append for the
 * fill unless every sequence is one token long, one attention for the step): ratio 0 if as wanted, Infinity if not
 * (also if a sequence's length did not advance by one).
 */
export async function pagedCaseChecks(c: PagedCase, seed: number): Promise<Check[]> {
  const data = pagedDataOf(c, seed);
  const want = await pagedReference(c, data);
  await tf.setBackend('webgpu');
  const pages = c.lengths.reduce((a, len) => a + Math.ceil(len / PAGE_SLOTS), 0) + 3; // a few never taken
  const pool = new PagedKvPool({ layers: 1, kvHeads: c.kvh, headDim: c.hd }, pages);
  const before = { ...pagedStats };
  try {
    const seqs = c.lengths.map(() => pool.sequence());
    fillPool(pool, seqs, c, data);
    const got = await pagedDecodeStep(pool, seqs, c, data);
    const advanced = seqs.every((s, b) => s.length === c.lengths[b]);
    const ran = [pagedStats.append - before.append, pagedStats.attention - before.attention];
    const wanted = [c.lengths.some((len) => len > 1) ? 1 : 0, 1];
    const name = pagedCaseName(c);
    return [
      { name: `${name}: dispatches (append, attention) ${ran} of ${wanted}`, ratio: tf.util.arraysEqual(ran, wanted) ? 0 : Infinity },
      { name: `${name} y`, ratio: advanced ? Math.max(...got.map((g, b) => worstRatio(g, want[b], PAGED_TOL.atol, PAGED_TOL.rtol))) : Infinity },
    ];
  } finally {
    pool.dispose();
  }
}

export async function pagedChecks(): Promise<Check[]> {
  const out: Check[] = [];
  for (const [i, c] of PAGED_CASES.entries()) out.push(...(await pagedCaseChecks(c, pagedSeed(i))));
  return out;
}
