/**
 * The paged KV cache (paged-kv-cache.ts) and its decode attention (paged-attention.ts) against plain attention on the
 * cpu backend: batches of sequences of different lengths (1, odd, over a page, many pages and tiles) whose pages are
 * interleaved in the pool, grouped queries (rep 1, 2, 7), head dims 8 and 64 (vec4 rows) and 6 (f32 rows), scores
 * large enough that the running max must rescale. Also: freed pages are reused and hold the new sequence's values;
 * a full pool refuses a batch by name and takes nothing (any backend); on webgpu a decode step of the tiny model gives
 * the per-sequence path's logits in fewer kernels (tf.profile), and the engine decodes a batch of prompts of
 * different lengths through the paged kernels (counted) to the wasm engine's tokens and logprobs. Skips only without
 * an adapter.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import type { BackendName, GenerateResult } from '../common/engine.ts';
import { createEngineFromWeights } from '../engine.ts';
import { fuseWeights, initWeights, type ModelWeights, toParams } from '../model.ts';
import { decodeOnDevice, decodePaged, deviceDecodeWeights, disposeDeviceDecodeWeights, prefillOnDevice, prefillPaged } from '../tensor-decode.ts';
import { sampling, tinyByteConfig } from '../testing/configs.ts';
import { pagedAttention } from './paged-attention.ts';
import { PAGE_SLOTS, pagedAppend, PagedKvPool, PagedKvPoolFullError, type PagedKvSequence, pagedStats } from './paged-kv-cache.ts';
import { randomArray, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

interface Case {
  lengths: number[];
  kvh: number;
  rep: number;
  hd: number;
  /** Range of the (pre-scaled) queries: larger makes peaked softmaxes. */
  qScale: number;
}

const CASES: Case[] = [
  { lengths: [1, 7, 17], kvh: 2, rep: 1, hd: 8, qScale: 0.5 },
  { lengths: [33, 1, 100, PAGE_SLOTS], kvh: 2, rep: 2, hd: 64, qScale: 0.15 },
  { lengths: [5, 130, 64, 65], kvh: 1, rep: 7, hd: 64, qScale: 0.15 }, // 130: three tiles of keys, nine pages
  { lengths: [3, 20], kvh: 3, rep: 7, hd: 8, qScale: 0.5 },
  { lengths: [9, 40, 1], kvh: 2, rep: 2, hd: 6, qScale: 0.5 }, // rows as f32s
  { lengths: [70, 2], kvh: 2, rep: 2, hd: 8, qScale: 6 }, // scores up to ~±50: the running max rescales
];

const caseName = (c: Case) => `lengths ${c.lengths} KVH ${c.kvh} rep ${c.rep} hd ${c.hd} q ±${c.qScale}`;

/** Per sequence: keys and values of every position [len, KVH, hd] and its query [H, hd]. */
function dataOf(c: Case, seed: number): { k: Float32Array; v: Float32Array; q: Float32Array }[] {
  const row = c.kvh * c.hd;
  return c.lengths.map((len, b) => ({
    k: randomArray(len * row, seed + 10 * b),
    v: randomArray(len * row, seed + 10 * b + 1),
    q: randomArray(c.kvh * c.rep * c.hd, seed + 10 * b + 2, c.qScale),
  }));
}

/** Plain attention on the cpu backend: per sequence, per kv head, softmax(q·Kᵀ)·V for its rep query heads → [H·hd]. */
async function reference(c: Case, data: ReturnType<typeof dataOf>): Promise<Float32Array[]> {
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
function fill(pool: PagedKvPool, seqs: PagedKvSequence[], c: Case, data: ReturnType<typeof dataOf>): void {
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
async function decodeStep(pool: PagedKvPool, seqs: PagedKvSequence[], c: Case, data: ReturnType<typeof dataOf>): Promise<Float32Array[]> {
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
const TOL = { atol: 2e-6, rtol: 1e-5 };

/**
 * One case: the pool filled by the append kernel (pages interleaved), one decode step, against the cpu backend's
 * plain attention; the worst ratio over its sequences (≤ 1 passes). Self-contained (webgpu selected; leaves it
 * active), so testing/checks.ts can run it: CASES.map((c, i) => pagedCaseRatio(c, 100 * i + 1)).
 */
async function pagedCaseRatio(c: Case, seed: number): Promise<number> {
  const data = dataOf(c, seed);
  const want = await reference(c, data);
  await tf.setBackend('webgpu');
  const pages = c.lengths.reduce((a, len) => a + Math.ceil(len / PAGE_SLOTS), 0) + 3; // a few never taken
  const pool = new PagedKvPool({ layers: 1, kvHeads: c.kvh, headDim: c.hd }, pages);
  try {
    const seqs = c.lengths.map(() => pool.sequence());
    fill(pool, seqs, c, data);
    const got = await decodeStep(pool, seqs, c, data);
    if (seqs.some((s, b) => s.length !== c.lengths[b])) return Infinity;
    return Math.max(...got.map((g, b) => worstRatio(g, want[b], TOL.atol, TOL.rtol)));
  } finally {
    pool.dispose();
  }
}

describe('the paged KV pool on any backend', () => {
  it('refuses a batch that needs more pages than are free, by name, taking none', async () => {
    await tf.setBackend('cpu');
    const pool = new PagedKvPool({ layers: 2, kvHeads: 1, headDim: 4 }, 4);
    const [a, b] = [pool.sequence(), pool.sequence()];
    pool.reserve([a], [PAGE_SLOTS + 1]); // two pages
    const failure = (() => {
      try {
        pool.reserve([a, b], [4 * PAGE_SLOTS, PAGE_SLOTS]); // two more for a, one for b: 3 > 2 free
        return null;
      } catch (err) {
        return err as Error;
      }
    })();
    expect(failure).toBeInstanceOf(PagedKvPoolFullError);
    expect(failure?.name).toBe('PagedKvPoolFullError');
    expect([pool.freePages, a.pages.length, b.pages.length]).toEqual([2, 2, 0]);
    pool.release(a);
    expect(pool.freePages).toBe(4);
    pool.dispose();
  });
});

describe.skipIf(skipReason !== null)(`paged decode attention on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('selects webgpu', async () => {
    expect((await selectBackend('webgpu', { syncReads: false })).name).toBe('webgpu');
  });

  CASES.forEach((c, i) => {
    it(`matches plain attention: ${caseName(c)}`, async () => {
      const before = tf.memory().numTensors;
      const counted = { ...pagedStats };
      expect(await pagedCaseRatio(c, 100 * i + 1), caseName(c)).toBeLessThanOrEqual(1);
      expect([pagedStats.append - counted.append, pagedStats.attention - counted.attention]).toEqual([c.lengths.some((len) => len > 1) ? 1 : 0, 1]);
      expect(tf.memory().numTensors).toBe(before); // the pool, the append's placeholder, the table, the inputs: all released
    });
  });

  it('reuses the pages of a finished sequence, holding the new sequence values', async () => {
    const c: Case = { lengths: [40, 23], kvh: 2, rep: 2, hd: 8, qScale: 0.5 };
    const first = dataOf(c, 7);
    const second = dataOf(c, 8);
    const want = await reference(c, second);
    await tf.setBackend('webgpu');
    const pool = new PagedKvPool({ layers: 1, kvHeads: c.kvh, headDim: c.hd }, 6); // 3 + 2 pages used, one spare
    const seqs = c.lengths.map(() => pool.sequence());
    fill(pool, seqs, c, first);
    await decodeStep(pool, seqs, c, first);
    const held = seqs.map((s) => [...s.pages]);
    seqs.forEach((s) => pool.release(s));
    expect(pool.freePages).toBe(6);
    const again = c.lengths.map(() => pool.sequence());
    fill(pool, again, c, second);
    expect(new Set(again.flatMap((s) => s.pages))).toEqual(new Set(held.flat())); // the freed pages, not the spare
    const got = await decodeStep(pool, again, c, second);
    got.forEach((g, b) => expect(worstRatio(g, want[b], TOL.atol, TOL.rtol), `sequence ${b}`).toBeLessThanOrEqual(1));
    pool.dispose();
  });
});

/** Prompts of different lengths (one, under a page, over one, near two) and tokens enough to cross page boundaries. */
const PROMPTS = [[5], [100, 2, 3, 9, 41], Array.from({ length: 17 }, (_, i) => (i * 11) % 250), Array.from({ length: 30 }, (_, i) => (i * 7 + 3) % 250)];
const MAX_TOKENS = 16;

/** Greedy generation of PROMPTS, all at once, on a fresh tiny engine. */
async function greedyBatch(backend: BackendName): Promise<GenerateResult[]> {
  const cfg = tinyByteConfig();
  const engine = await createEngineFromWeights({ name: 'paged-test', config: cfg, weights: initWeights(cfg, 3), tokenizer: null, backend, seed: 1 });
  try {
    return await Promise.all(PROMPTS.map((promptIds) => engine.generate({ promptIds, sampling: sampling({ maxTokens: MAX_TOKENS }) })));
  } finally {
    await engine.close();
  }
}

describe.skipIf(skipReason !== null)(`paged decoding of the model on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('gives the per-sequence path logits in fewer kernels per step', async () => {
    await selectBackend('webgpu', { syncReads: false });
    const cfg = tinyByteConfig();
    const params = toParams(initWeights(cfg, 3));
    const w = tf.tidy(() => fuseWeights(cfg, params) as unknown as tf.TensorContainer) as unknown as ModelWeights;
    const dw = deviceDecodeWeights(cfg, params);
    const pool = new PagedKvPool({ layers: cfg.num_hidden_layers, kvHeads: cfg.num_key_value_heads, headDim: cfg.head_dim }, 16);
    const plain = await prefillOnDevice(cfg, w, PROMPTS);
    const paged = await prefillPaged(cfg, w, pool, PROMPTS);
    plain.forEach((p, i) => expect(worstRatio(paged[i].logits, p.logits, 1e-5, 1e-4), `prefill ${i}`).toBeLessThanOrEqual(1));
    const tokens = PROMPTS.map((p) => p[0]);
    const kernels = { plain: 0, paged: 0 };
    for (let step = 0; step < 3; step++) {
      let want: Float32Array = new Float32Array(0);
      let got: Float32Array = new Float32Array(0);
      // tf.profile hands back the engine's one profile object, which the next profile empties: count at once.
      kernels.plain = (await tf.profile(async () => void (want = await decodeOnDevice(cfg, w, dw, plain.map((p) => p.cache), tokens)))).kernels.length;
      kernels.paged = (await tf.profile(async () => void (got = await decodePaged(cfg, w, dw, paged.map((p) => p.cache), tokens)))).kernels.length;
      expect(worstRatio(got, want, 1e-5, 1e-4), `step ${step}`).toBeLessThanOrEqual(1);
    }
    console.log(`kernels per decode step, ${PROMPTS.length} sequences, ${cfg.num_hidden_layers} layers: ${kernels.plain} per sequence, ${kernels.paged} paged`);
    expect(kernels.paged).toBeLessThan(kernels.plain);
    for (const p of plain) p.cache.dispose();
    for (const p of paged) pool.release(p.cache);
    pool.dispose();
    disposeDeviceDecodeWeights(dw);
  });

  it('the engine decodes a batch through the paged kernels to the wasm engine tokens and logprobs', async () => {
    const wasm = await greedyBatch('wasm');
    const before = { ...pagedStats };
    const gpu = await greedyBatch('webgpu');
    const layers = tinyByteConfig().num_hidden_layers;
    // The first token comes from the prefill; the others from decode steps of the whole batch (one dispatch per layer).
    expect(pagedStats.attention - before.attention).toBe(layers * (MAX_TOKENS - 1));
    expect(pagedStats.append - before.append).toBe(layers); // the four prompts prefilled together
    gpu.forEach((r, i) => {
      expect(r.tokens.map((t) => t.id), `prompt ${i}`).toEqual(wasm[i].tokens.map((t) => t.id));
      r.tokens.forEach((t, k) => expect(Math.abs(t.logprob - wasm[i].tokens[k].logprob), `prompt ${i}, token ${k}`).toBeLessThan(1e-3));
    });
  });
});
