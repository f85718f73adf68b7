/**
 * A device KV cache too small for every running sequence (worker/sampler.ts's preemption by recomputation): the
 * youngest sequences leave the batch and resume later, so every request still gets the tokens it gets alone, one
 * policy version each, also across a weight update; only a request that alone does not fit fails. Skips only
 * without an adapter.
 */
import { describe, expect, it } from 'vitest';
import { selectBackend } from '../backend.ts';
import type { GenerateResult } from '../common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from '../engine.ts';
import { initWeights } from '../model.ts';
import { sampling, tinyByteConfig } from '../testing/configs.ts';
import { PAGE_SLOTS } from './paged-kv-cache.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

const CFG = tinyByteConfig({ max_position_embeddings: 128 });
/** Bytes of one page of the pool (float32 keys and values of every layer). */
const PAGE_BYTES = 4 * 2 * CFG.num_key_value_heads * PAGE_SLOTS * CFG.head_dim * CFG.num_hidden_layers;

const run = (n: number, from: number) => Array.from({ length: n }, (_, i) => (from + i * 7) % 250);
const ids = (r: GenerateResult) => r.tokens.map((t) => t.id);

/** Four prompts of 20 tokens, each answered with 40: four pages a request, sixteen together. */
const PROMPTS = [3, 40, 77, 120].map((from) => run(20, from));
const ANSWER = { maxTokens: 40, stopTokenIds: [] as number[] };

async function engineWith(pages?: number): Promise<LocalEngine> {
  return createEngineFromWeights({
    name: 'preemption-test',
    config: CFG,
    weights: initWeights(CFG, 11),
    tokenizer: null,
    backend: 'webgpu',
    seed: 1,
    ...(pages ? { deviceKvCacheBytes: pages * PAGE_BYTES } : {}),
  });
}

/** Each prompt alone on a pool with room to spare: what every request must get. */
async function alone(seeded: boolean): Promise<GenerateResult[]> {
  const engine = await engineWith();
  try {
    const out: GenerateResult[] = [];
    for (const [i, promptIds] of PROMPTS.entries()) out.push(await engine.generate({ promptIds, sampling: sampling({ ...ANSWER, ...(seeded ? { temperature: 1, seed: 100 + i } : {}) }) }));
    return out;
  } finally {
    await engine.close();
  }
}

function expectSame(got: GenerateResult[], want: GenerateResult[]): void {
  got.forEach((r, i) => {
    expect(ids(r), `request ${i}`).toEqual(ids(want[i]));
    r.tokens.forEach((tok, j) => expect(tok.logprob).toBeCloseTo(want[i].tokens[j].logprob, 4));
  });
}

describe.skipIf(skipReason !== null)(`preemption when the device KV cache runs out${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('gives every request of a batch that outgrows the pool the tokens it gets alone, greedy and seeded', async () => {
    expect((await selectBackend('webgpu', { syncReads: false })).name).toBe('webgpu');
    for (const seeded of [false, true]) {
      const want = await alone(seeded);
      const small = await engineWith(10); // room for two and a half of the four
      try {
        const got = await Promise.all(PROMPTS.map((promptIds, i) => small.generate({ promptIds, sampling: sampling({ ...ANSWER, ...(seeded ? { temperature: 1, seed: 100 + i } : {}) }) })));
        expectSame(got, want);
        expect(got.every((r) => r.finishReason === 'length')).toBe(true);
        // Some were taken out and resumed: without preemption the batch would have failed.
        expect(got.reduce((a, r) => a + (r.preemptions ?? 0), 0)).toBeGreaterThan(0);
      } finally {
        await small.close();
      }
    }
  });

  it('keeps a preempted request on the weights it started with when a training step waits for the batch', async () => {
    const small = await engineWith(10);
    try {
      // Every request started (its first token out) before the step asks for the weights.
      let started!: () => void;
      const allStarted = new Promise<void>((r) => (started = r));
      const begun = new Set<number>();
      const running = PROMPTS.map((promptIds, i) =>
        small.generate({ promptIds, sampling: sampling(ANSWER) }, () => {
          begun.add(i);
          if (begun.size === PROMPTS.length) started();
        }),
      );
      await allStarted;
      const tokens = run(30, 9);
      const trained = small.trainStep([{ tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) }], { loss: 'sft', learningRate: 1e-2 });
      const got = await Promise.all(running);
      const metrics = await trained;
      expect(got.reduce((a, r) => a + (r.preemptions ?? 0), 0)).toBeGreaterThan(0);
      expect(got.map((r) => r.policyVersion)).toEqual([0, 0, 0, 0]);
      expect(metrics.policyVersion).toBe(1);
      expect((await small.generate({ promptIds: PROMPTS[0], sampling: sampling({ maxTokens: 2 }) })).policyVersion).toBe(1);
    } finally {
      await small.close();
    }
  });

  it('fails only a request that does not fit in the pool alone', async () => {
    const small = await engineWith(3); // 48 positions
    try {
      const [tooLong, fits] = await Promise.allSettled([
        small.generate({ promptIds: run(60, 5), sampling: sampling({ maxTokens: 4 }) }),
        small.generate({ promptIds: run(10, 6), sampling: sampling({ maxTokens: 4 }) }),
      ]);
      expect(tooLong.status).toBe('rejected');
      expect((tooLong as PromiseRejectedResult).reason).toMatchObject({ name: 'PagedKvPoolFullError' });
      expect(fits.status).toBe('fulfilled');
      expect((fits as PromiseFulfilledResult<GenerateResult>).value.tokens).toHaveLength(4);
    } finally {
      await small.close();
    }
  });
});
