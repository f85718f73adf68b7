import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { createEngineFromWeights, type LocalEngine } from './engine.ts';
import { decodeHostWeights, extendStep, forward, fuseWeights, initWeights, prefill, toParams } from './model.ts';
import { PrefixStore, sharedPrefixGroups } from './prefix-store.ts';
import { sampling, tinyConfig } from './testing/configs.ts';

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => (i * 7 + seed * 13) % 40);

beforeAll(async () => {
  await selectBackend('wasm');
});

describe('continuing a cached prefix', () => {
  const cfg = tinyConfig();
  const params = toParams(initWeights(cfg, 8));
  const w = fuseWeights(cfg, params);
  const host = decodeHostWeights(cfg, params);
  const V = cfg.vocab_size;

  it('a copied prefix extended by the rest of a prompt gives the full forward logits, and leaves the original alone', () => {
    const seq = ids(30, 1);
    const full = tf.tidy(() => forward(cfg, w, Int32Array.from(seq), 1, seq.length).dataSync());
    const { cache: original } = prefill(cfg, w, seq.slice(0, 20));
    const before = original.read(1);
    const copy = original.copyPrefix(12);
    expect(copy.tokens).toEqual(seq.slice(0, 12));
    // Two sequences extended together: the copy by 18 tokens, a second copy by 3.
    const other = original.copyPrefix(17);
    const logits = extendStep(cfg, w, host, [copy, other], [seq.slice(12), seq.slice(17, 20)]);
    expect(maxDiff(logits.subarray(0, V), full.slice(29 * V, 30 * V))).toBeLessThan(1e-4);
    expect(maxDiff(logits.subarray(V, 2 * V), full.slice(19 * V, 20 * V))).toBeLessThan(1e-4);
    expect(copy.length).toBe(30);
    expect(copy.tokens).toEqual(seq);
    expect(original.read(1)).toEqual(before);
    expect(original.length).toBe(20);
  });

  it('the store hands out the longest shared prefix (never the whole prompt), evicts the least recently used, and clears', () => {
    const a = prefill(cfg, w, ids(40, 2)).cache;
    const b = prefill(cfg, w, ids(40, 3)).cache;
    const store = new PrefixStore(a.bytes + b.bytes);
    store.put(a);
    store.put(b);
    expect(store.size.entries).toBe(2);
    const differsAt25 = (ids(40, 2)[25] + 1) % 40;
    expect(store.take([...ids(40, 2).slice(0, 25), differsAt25, 2, 3])?.length).toBe(25);
    expect(store.take(ids(40, 3))?.length).toBe(39); // the last token is recomputed: its logits are needed
    expect(store.take(ids(40, 3), 0)).toBeNull(); // nothing left to compute is not allowed
    expect(store.take([...ids(40, 2).slice(0, 10), 5, 5, 5])).toBeNull(); // shorter than the minimum
    // b was used last: a third cache over budget evicts a.
    store.put(prefill(cfg, w, ids(40, 4)).cache);
    expect(store.take(ids(40, 2))).toBeNull();
    expect(store.take(ids(40, 3))).not.toBeNull();
    store.clear();
    expect(store.size).toEqual({ entries: 0, bytes: 0 });
  });
});

/** Per describe: an engine with the prefix cache and one without, on the same weights (fresh for each describe). */
function twoEngines(): { cached: LocalEngine; plain: LocalEngine } {
  const cfg = tinyConfig({ max_position_embeddings: 256 });
  const engines = {} as { cached: LocalEngine; plain: LocalEngine };
  beforeAll(async () => {
    const weights = initWeights(cfg, 12);
    engines.cached = await createEngineFromWeights({ name: 'cached', config: cfg, weights, tokenizer: null, backend: 'wasm', seed: 1 });
    engines.plain = await createEngineFromWeights({ name: 'plain', config: cfg, weights, tokenizer: null, backend: 'wasm', seed: 1, prefixCacheBytes: 0 });
  });
  afterAll(async () => {
    await engines.cached.close();
    await engines.plain.close();
  });
  return engines;
}

describe('the engine reuses finished sequences for prompts that continue them', () => {
  const engines = twoEngines();

  it('a multi-turn conversation samples the same tokens and logprobs as without the cache, computing only the new part', async () => {
    let prompt = ids(60, 5);
    for (let turn = 0; turn < 3; turn++) {
      const params = { promptIds: prompt, sampling: sampling({ temperature: 1, seed: 7 + turn, maxTokens: 12, topLogprobs: 2 }) };
      const [a, b] = [await engines.cached.generate(params), await engines.plain.generate(params)];
      expect(a.tokens.map((t) => t.id)).toEqual(b.tokens.map((t) => t.id));
      expect(maxDiff(a.tokens.map((t) => t.logprob), b.tokens.map((t) => t.logprob))).toBeLessThan(1e-4);
      expect(b.cachedPromptTokens).toBeUndefined();
      // Turn 0 has nothing cached; later turns reuse the previous prompt and all its generated tokens but the last
      // (which was sampled, never fed back).
      if (turn === 0) expect(a.cachedPromptTokens).toBeUndefined();
      else expect(a.cachedPromptTokens).toBeGreaterThanOrEqual(prompt.length - 8 - 1);
      prompt = [...prompt, ...a.tokens.map((t) => t.id), ...ids(8, turn)];
    }
  });

  it('forgets every cached prefix when the weights change', async () => {
    const prompt = ids(50, 9);
    await engines.cached.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 4 }) });
    expect((await engines.cached.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 4 }) })).cachedPromptTokens).toBe(49);
    const sample = { tokens: prompt, lossMask: prompt.map((_, i) => (i > 0 ? 1 : 0)), advantages: prompt.map(() => 1), oldLogprobs: prompt.map(() => -3) };
    await engines.cached.trainStep([sample], { loss: 'ppo', learningRate: 1e-3 });
    expect((await engines.cached.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 4 }) })).cachedPromptTokens).toBeUndefined();
  });

});

describe("a group's repeats started together", () => {
  const engines = twoEngines();

  it("are served from one computation of the shared prompt, with the same tokens and logprobs", async () => {
    const task = ids(70, 11);
    const prompts = [0, 1, 2, 3].map((k) => [...task, ...ids(5 + k, 20 + k)]);
    const params = (promptIds: number[], k: number) => ({ promptIds, sampling: sampling({ temperature: 1, seed: 30 + k, maxTokens: 6 }) });
    const [a, b] = [await Promise.all(prompts.map((p, k) => engines.cached.generate(params(p, k)))), await Promise.all(prompts.map((p, k) => engines.plain.generate(params(p, k))))];
    a.forEach((r, k) => {
      expect(r.tokens.map((t) => t.id)).toEqual(b[k].tokens.map((t) => t.id));
      expect(maxDiff(r.tokens.map((t) => t.logprob), b[k].tokens.map((t) => t.logprob))).toBeLessThan(1e-4);
    });
    // One of the group paid for the shared prompt; every other reused it.
    const reused = a.map((r) => r.cachedPromptTokens ?? 0).sort((x, y) => x - y);
    expect(reused[0]).toBe(0);
    for (const r of reused.slice(1)) expect(r).toBeGreaterThanOrEqual(task.length);
    // A repeat that starts later, while the prefix is still stored, reuses it as well.
    const late = await engines.cached.generate(params([...task, ...ids(9, 40)], 9));
    expect(late.cachedPromptTokens).toBeGreaterThanOrEqual(task.length);
  });
});

describe('shared prefixes within a prefill batch', () => {
  it('groups prompts sharing at least the minimum, up to all but the shortest one\'s last token', () => {
    const base = ids(30, 1);
    const groups = sharedPrefixGroups([
      [...base, 1, 2],
      ids(30, 2),
      [...base, 3],
      base.slice(0, 20),
      [...base.slice(0, 10), 7, 7, 7],
    ]);
    expect(groups).toEqual([{ members: [3, 0, 2], length: 19 }]);
    expect(sharedPrefixGroups([ids(40, 1)])).toEqual([]);
  });
});
