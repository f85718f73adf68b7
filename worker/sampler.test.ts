import { describe, expect, it } from 'vitest';
import type { GeneratedToken, SamplingParams } from './common/engine.ts';
import { seededRandom } from './model.ts';
import { ContinuousBatcher, type DecodeCache, type DecoderRuntime, type SampledStep, sampleToken } from './sampler.ts';
import { sampling } from './testing/configs.ts';
import type { DeviceSampling } from './webgpu/sample.ts';

const logits = Float32Array.from([1, 3, 2, 0.5, -1]);
const draw = (over: Parameters<typeof sampling>[0], n = 4000, seed = 1) => {
  const rand = seededRandom(seed);
  const counts = new Array<number>(logits.length).fill(0);
  for (let i = 0; i < n; i++) counts[sampleToken(logits, sampling(over), rand).id]++;
  return counts.map((c) => c / n);
};

describe('sampleToken', () => {
  it('greedy picks the argmax and reports its temperature-1 logprob', () => {
    const t = sampleToken(logits, sampling({ topLogprobs: 2 }), Math.random);
    const lse = Math.log(Array.from(logits).reduce((a, z) => a + Math.exp(z), 0));
    expect(t.id).toBe(1);
    expect(t.logprob).toBeCloseTo(3 - lse, 6);
    expect(t.top!.map((x) => x.id)).toEqual([1, 2]);
  });

  it('a temperature whose reciprocal overflows picks greedily instead of producing NaN', () => {
    const t = sampleToken(logits, sampling({ temperature: 4.4e-323, topLogprobs: 1 }), Math.random);
    expect(t.id).toBe(1);
    expect(Number.isFinite(t.logprob)).toBe(true);
  });

  it('samples in proportion to softmax(logits / T)', () => {
    const freq = draw({ temperature: 2 });
    const w = Array.from(logits).map((z) => Math.exp(z / 2));
    const total = w.reduce((a, b) => a + b, 0);
    freq.forEach((f, i) => expect(Math.abs(f - w[i] / total)).toBeLessThan(0.03));
  });

  it('top-k and top-p cut the tail', () => {
    const k2 = draw({ temperature: 1, topK: 2 }, 2000);
    expect(k2[0] + k2[3] + k2[4]).toBe(0);
    expect(k2[1]).toBeGreaterThan(k2[2]);
    // p(1) ≈ 0.63, p(1)+p(2) ≈ 0.86: topP 0.7 keeps ids 1 and 2 only.
    const p = draw({ temperature: 1, topP: 0.7 }, 2000);
    expect(p[0] + p[3] + p[4]).toBe(0);
    expect(p[2]).toBeGreaterThan(0);
  });

  it('top-p over a large vocabulary keeps exactly the nucleus a full sort gives', () => {
    const rand = seededRandom(11);
    for (const [vocab, spread, topP] of [[50_000, 8, 0.9], [50_000, 2, 0.95], [3000, 0.01, 0.5], [151_936, 12, 0.8]] as const) {
      const big = Float32Array.from({ length: vocab }, () => (rand() * 2 - 1) * spread);
      const lse = Math.log(Array.from(big).reduce((a, z) => a + Math.exp(z), 0));
      // The nucleus by definition: sort everything, keep the fewest best tokens whose mass reaches topP.
      const order = Array.from({ length: vocab }, (_, i) => i).sort((a, b) => big[b] - big[a]);
      let mass = 0;
      let keep = 0;
      while (mass < topP) mass += Math.exp(big[order[keep++]] - lse);
      const nucleus = new Set(order.slice(0, keep));
      const draws = new Set<number>();
      for (let i = 0; i < 40; i++) draws.add(sampleToken(big, sampling({ temperature: 1, topP }), rand).id);
      for (const id of draws) expect(nucleus.has(id)).toBe(true);
      // A draw with u just below 1 lands on the nucleus's least probable token.
      expect(sampleToken(big, sampling({ temperature: 1, topP }), () => 1 - 1e-12).id).toBe(order[keep - 1]);
    }
  });

  it("the logprob ignores truncation: it is the policy's own", () => {
    const rand = seededRandom(3);
    const t = sampleToken(logits, sampling({ temperature: 1, topK: 1 }), rand);
    const lse = Math.log(Array.from(logits).reduce((a, z) => a + Math.exp(z), 0));
    expect(t.id).toBe(1);
    expect(t.logprob).toBeCloseTo(3 - lse, 6);
  });
});

/** A stand-in model over FAKE_VOCAB tokens whose logits depend on the position and the last token. */
const FAKE_VOCAB = 9;
const fakeLogits = (position: number, last: number) => Float32Array.from({ length: FAKE_VOCAB }, (_, i) => 3 * Math.sin(1.7 * position + 0.3 * last + 2.1 * i));

interface FakeCache extends DecodeCache {
  length: number;
  /** The request's sampling (a device sampler is handed the same, as a DeviceSampling). */
  s: SamplingParams;
}

/**
 * Runtime over fakeLogits; with `device`, decodeSampled (and prefill, when handed picks) samples each row by
 * sampleToken with the pick's draw.
 */
function fakeRuntime(bySampling: Map<number, SamplingParams>, device: boolean, calls: { decode: number; sampled: number; prefilledOnDevice: number; logitRows: number }): DecoderRuntime<FakeCache> {
  const step = (caches: FakeCache[], tokens: number[]) =>
    caches.map((c, i) => {
      const row = fakeLogits(c.length, tokens[i]);
      c.length++;
      return row;
    });
  return {
    contextLength: 64,
    vocabSize: FAKE_VOCAB,
    prefill: (prompts, picks) =>
      prompts.map((p, i) => {
        const cache = { length: p.length, s: bySampling.get(p[0])! };
        const logits = fakeLogits(p.length, p[p.length - 1]);
        if (!picks) return { cache, logits };
        calls.prefilledOnDevice++;
        const { id, logprob } = sampleToken(logits, cache.s, () => picks[i].draw);
        return { cache, logits: new Float32Array(0), token: { id, logprob } };
      }),
    decode: (caches, tokens) => {
      calls.decode++;
      const out = new Float32Array(caches.length * FAKE_VOCAB);
      step(caches, tokens).forEach((row, i) => out.set(row, i * FAKE_VOCAB));
      return out;
    },
    ...(device && {
      decodeSampled: async (caches: FakeCache[], tokens: number[], picks: DeviceSampling[], logitRows: number[]): Promise<SampledStep> => {
        calls.sampled++;
        calls.logitRows += logitRows.length;
        const rows = step(caches, tokens);
        const logits = new Float32Array(logitRows.length * FAKE_VOCAB);
        logitRows.forEach((row, k) => logits.set(rows[row], k * FAKE_VOCAB));
        const picked = rows.map((row, i): GeneratedToken => {
          const { id, logprob } = sampleToken(row, caches[i].s, () => picks[i].draw);
          return { id, logprob };
        });
        return { tokens: picked, logits };
      },
    }),
    policyVersion: () => 1,
  };
}

describe('ContinuousBatcher with a runtime that samples on the device', () => {
  /** Requests of every mode, seeded; the prompt's first token keys its sampling. */
  const REQUESTS: SamplingParams[] = [
    sampling({ maxTokens: 12 }),
    sampling({ maxTokens: 12, temperature: 1, seed: 5 }),
    sampling({ maxTokens: 9, temperature: 0.8, topK: 3, seed: 6 }),
    sampling({ maxTokens: 12, temperature: 1.2, topP: 0.7, seed: 7 }),
    sampling({ maxTokens: 7, temperature: 1, topK: 4, topP: 0.9, seed: 8 }),
  ];

  async function run(device: boolean, requests: SamplingParams[]) {
    const bySampling = new Map(requests.map((s, i) => [i, s]));
    const calls = { decode: 0, sampled: 0, prefilledOnDevice: 0, logitRows: 0 };
    const batcher = new ContinuousBatcher(fakeRuntime(bySampling, device, calls) as DecoderRuntime<DecodeCache>, null);
    const results = await Promise.all(requests.map((s, i) => batcher.generate({ promptIds: [i, 3, 1], sampling: s })));
    return { tokens: results.map((r) => r.tokens.map((t) => t.id)), tops: results.map((r) => r.tokens.map((t) => t.top ?? null)), calls };
  }

  it("takes each request's draws as the host sampler does, from the prefill on: the same tokens", async () => {
    const host = await run(false, REQUESTS);
    const device = await run(true, REQUESTS);
    expect(device.tokens).toEqual(host.tokens);
    expect(device.calls.decode).toBe(0);
    expect(device.calls.sampled).toBe(host.calls.decode);
    expect([device.calls.prefilledOnDevice, host.calls.prefilledOnDevice]).toEqual([REQUESTS.length, 0]);
    expect(host.tokens.flat().length).toBe(REQUESTS.reduce((a, s) => a + s.maxTokens, 0)); // no stop ids: every request ran to its length
  });

  it("samples every step's rows on the device when a request wants top logprobs, reading that row's logits only", async () => {
    const requests = [...REQUESTS, sampling({ maxTokens: 3, temperature: 1, topLogprobs: 2, seed: 9 })];
    const host = await run(false, requests);
    const device = await run(true, requests);
    expect(device.tokens).toEqual(host.tokens);
    expect(device.tops).toEqual(host.tops);
    expect(device.tops.at(-1)!.every((top) => top?.length === 2)).toBe(true);
    expect(device.calls.decode).toBe(0);
    expect(device.calls.sampled).toBe(host.calls.decode);
    expect(device.calls.logitRows).toBe(2); // the two steps the top-logprobs request took part in (its first token is the prefill's)
    expect(device.calls.prefilledOnDevice).toBe(0); // all prompts prefilled together, one of them wanting top logprobs
  });
});
