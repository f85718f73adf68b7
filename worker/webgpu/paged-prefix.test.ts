/**
 * Prefix caching on the device (paged-prefix-store.ts, PagedKvPool.share, tensor-decode.ts extendPaged): the pool's
 * page sharing and the store's keep/take/reclaim rules on any backend; on webgpu, prompts that continue a finished
 * sequence, or share an opening with prompts started beside them, reuse its pages and give the tokens and logprobs
 * of an engine without the cache, also when the pool is small enough that kept sequences must be given back. Skips
 * only without an adapter.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import type { GenerateResult } from '../common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from '../engine.ts';
import { initWeights } from '../model.ts';
import { sampling, tinyByteConfig } from '../testing/configs.ts';
import { PAGE_SLOTS, PagedKvPool, type PagedKvSequence, PagedKvShapeError, pagedStats } from './paged-kv-cache.ts';
import { PagedPrefixStore } from './paged-prefix-store.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

/** A sequence of `tokens` with its pages reserved and its length set, as a prefill leaves it. */
function written(pool: PagedKvPool, tokens: number[]): PagedKvSequence {
  const seq = pool.sequence();
  pool.reserve([seq], [tokens.length]);
  seq.length = tokens.length;
  seq.tokens = tokens.slice();
  return seq;
}

const run = (n: number, from = 0) => Array.from({ length: n }, (_, i) => (from + i * 7) % 250);

describe('device prefix sharing on any backend', () => {
  it('shares whole written pages, freeing a page only when its last holder lets go', async () => {
    await tf.setBackend('cpu');
    const pool = new PagedKvPool({ layers: 1, kvHeads: 1, headDim: 4 }, 8);
    const a = written(pool, run(2 * PAGE_SLOTS + 3)); // three pages
    const b = pool.share(a, 2 * PAGE_SLOTS);
    expect(b.pages).toEqual(a.pages.slice(0, 2));
    expect([b.length, b.tokens]).toEqual([2 * PAGE_SLOTS, a.tokens.slice(0, 2 * PAGE_SLOTS)]);
    pool.reserve([b], [2 * PAGE_SLOTS + 1]); // b's next position takes a page of its own
    expect(b.pages[2]).not.toBe(a.pages[2]);
    expect(pool.freePages).toBe(4);
    pool.release(a); // the shared two stay held by b
    expect(pool.freePages).toBe(5);
    pool.release(b);
    expect(pool.freePages).toBe(8);
    const c = written(pool, run(PAGE_SLOTS + 2));
    for (const bad of [PAGE_SLOTS + 1, 2 * PAGE_SLOTS]) expect(() => pool.share(c, bad)).toThrowError(expect.objectContaining({ name: PagedKvShapeError.name }));
    pool.dispose();
  });

  it('keeps finished sequences, hands out the longest whole-page prefix, and gives pages back when the pool runs short', async () => {
    await tf.setBackend('cpu');
    const pool = new PagedKvPool({ layers: 1, kvHeads: 1, headDim: 4 }, 6);
    const store = new PagedPrefixStore(pool);
    store.put(written(pool, run(PAGE_SLOTS - 1))); // shorter than a page: released at once
    expect([store.size, pool.freePages]).toEqual([0, 6]);
    const long = run(2 * PAGE_SLOTS + 5);
    store.put(written(pool, long)); // three pages kept
    expect([store.size, pool.freePages]).toEqual([1, 3]);
    // A prompt sharing 2 pages and 3 positions reuses the 2 pages; one sharing less than a page, nothing.
    const taken = store.take([...long.slice(0, 2 * PAGE_SLOTS + 3), 251, 252]);
    expect(taken?.length).toBe(2 * PAGE_SLOTS);
    expect(store.take([...long.slice(0, PAGE_SLOTS - 1), 253, 254])).toBeNull();
    // Equal to the prompt: all but its last token count, so a page less.
    expect(store.take(long.slice(0, 2 * PAGE_SLOTS))?.length).toBe(PAGE_SLOTS);
    // A reservation beyond the free pages makes the store let go of its sequence (the pages the taken ones share stay held).
    const big = pool.sequence();
    pool.reserve([big], [4 * PAGE_SLOTS]);
    expect(store.size).toBe(0);
    expect(pool.freePages).toBe(0);
    pool.dispose();
  });
});

const CFG = tinyByteConfig({ max_position_embeddings: 128 });

async function engineWith(over: { prefixCacheBytes?: number; deviceKvCacheBytes?: number } = {}): Promise<LocalEngine> {
  return createEngineFromWeights({ name: 'paged-prefix-test', config: CFG, weights: initWeights(CFG, 5), tokenizer: null, backend: 'webgpu', seed: 1, ...over });
}

const ids = (r: GenerateResult) => r.tokens.map((t) => t.id);

/** A conversation of three turns: each prompt continues the previous prompt and its answer. */
async function conversation(engine: LocalEngine, from = 3): Promise<GenerateResult[]> {
  const out: GenerateResult[] = [];
  let prompt = run(37, from);
  for (let turn = 0; turn < 3; turn++) {
    const r = await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 6, topLogprobs: 0 }) });
    out.push(r);
    prompt = [...prompt, ...ids(r), ...run(9, 50 + turn)];
  }
  return out;
}

describe.skipIf(skipReason !== null)(`device prefix caching on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('continues kept sequences from their pages, to the tokens and logprobs of an engine without the cache', async () => {
    expect((await selectBackend('webgpu', { syncReads: false })).name).toBe('webgpu');
    const plain = await engineWith({ prefixCacheBytes: 0 });
    const want = await conversation(plain);
    await plain.close();
    const cached = await engineWith();
    const appends = pagedStats.append;
    const got = await conversation(cached);
    await cached.close();
    expect(pagedStats.append).toBeGreaterThan(appends);
    expect(got.map((r) => r.cachedPromptTokens ?? 0)).toEqual([0, 32, 48]); // whole pages of each earlier turn
    expect(want.every((r) => r.cachedPromptTokens === undefined)).toBe(true);
    got.forEach((r, t) => {
      expect(ids(r), `turn ${t}`).toEqual(ids(want[t]));
      r.tokens.forEach((tok, i) => expect(tok.logprob).toBeCloseTo(want[t].tokens[i].logprob, 4));
    });
  });

  it('prefills the shared pages of prompts started together once, to the tokens of each prompt alone', async () => {
    const opening = run(40, 7);
    const prompts = [
      [...opening, 1, 2],
      run(20, 90),
      [...opening, 1, 2],
      [...opening, 3],
    ];
    const plain = await engineWith({ prefixCacheBytes: 0 });
    const want: GenerateResult[] = [];
    for (const promptIds of prompts) want.push(await plain.generate({ promptIds, sampling: sampling({ maxTokens: 5 }) })); // one at a time: nothing shared
    await plain.close();
    const together = await engineWith();
    try {
      const got = await Promise.all(prompts.map((promptIds) => together.generate({ promptIds, sampling: sampling({ maxTokens: 5 }) })));
      // The 40-token opening's two whole pages: computed once (for the first member), reused by the other two.
      expect(got.map((r) => r.cachedPromptTokens ?? 0).sort()).toEqual([0, 0, 32, 32]);
      expect(got[1].cachedPromptTokens).toBeUndefined();
      got.forEach((r, i) => {
        expect(ids(r), `prompt ${i}`).toEqual(ids(want[i]));
        r.tokens.forEach((tok, j) => expect(tok.logprob).toBeCloseTo(want[i].tokens[j].logprob, 4));
      });
    } finally {
      await together.close();
    }
  });

  it('gives kept pages back when the pool runs short, and forgets them when the weights change', async () => {
    // Eight pages. A conversation's last turn is kept in five (73 positions); another conversation's second turn
    // then needs two more than the three left beside its own first turn's, so the first conversation's go.
    const pageBytes = 4 * 2 * CFG.num_key_value_heads * PAGE_SLOTS * CFG.head_dim * CFG.num_hidden_layers;
    const small = await engineWith({ deviceKvCacheBytes: 8 * pageBytes });
    try {
      const first = await conversation(small, 3);
      const other = await conversation(small, 100);
      const again = await conversation(small, 3);
      expect(other.map((r) => r.cachedPromptTokens ?? 0)).toEqual([0, 32, 48]);
      expect(again[0].cachedPromptTokens).toBeUndefined(); // given back to make room
      expect(again.map((r) => r.cachedPromptTokens ?? 0)).toEqual([0, 32, 48]);
      expect(again.map(ids)).toEqual(first.map(ids));
      const tokens = run(30, 9);
      const sample = { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) };
      await small.trainStep([sample], { loss: 'sft', learningRate: 1e-3 });
      const after = await small.generate({ promptIds: run(37, 3), sampling: sampling({ maxTokens: 2 }) });
      expect(after.cachedPromptTokens).toBeUndefined(); // computed by the old weights: not reused
    } finally {
      await small.close();
    }
  });
});
