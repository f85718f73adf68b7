import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampling, tinyByteConfig } from './testing/configs.ts';
import { createEngineFromWeights, type LocalEngine } from './engine.ts';
import { initWeights } from './model.ts';
import { ByteTokenizer } from './tokenizer/byte-tokenizer.ts';
import { StreamDecoder } from './tokenizer/stream-decoder.ts';

let engine: LocalEngine;
const tokenizer = new ByteTokenizer();
const prompt = tokenizer.encode('hello there');

beforeAll(async () => {
  const cfg = tinyByteConfig();
  // A larger init scale makes the random model's distribution peaked enough that greedy ties never happen.
  const weights = initWeights(cfg, 11);
  engine = await createEngineFromWeights({ name: 'test', config: cfg, weights, tokenizer, backend: 'wasm', seed: 1 });
});
afterAll(() => engine.close());

describe('sampling', () => {
  it('is reproducible for a seed and differs across seeds', async () => {
    const a = await engine.generate({ promptIds: prompt, sampling: sampling({ temperature: 1, seed: 42, maxTokens: 12 }) });
    const b = await engine.generate({ promptIds: prompt, sampling: sampling({ temperature: 1, seed: 42, maxTokens: 12 }) });
    const c = await engine.generate({ promptIds: prompt, sampling: sampling({ temperature: 1, seed: 43, maxTokens: 12 }) });
    expect(a.tokens.map((t) => t.id)).toEqual(b.tokens.map((t) => t.id));
    expect(a.tokens.map((t) => t.id)).not.toEqual(c.tokens.map((t) => t.id));
    expect(a.finishReason).toBe('length');
    expect(a.tokens).toHaveLength(12);
  });

  it('stops at a stop token id, and reports top alternatives best first', async () => {
    const free = await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 8 }) });
    const stopId = free.tokens[3].id;
    const firstAt = free.tokens.findIndex((t) => t.id === stopId);
    const stopped = await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 8, stopTokenIds: [stopId], topLogprobs: 3 }) });
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.tokens).toHaveLength(firstAt + 1);
    const top = stopped.tokens[0].top!;
    expect(top).toHaveLength(3);
    expect(top[0].id).toBe(stopped.tokens[0].id); // greedy picks the best
    expect(top[0].logprob).toBeGreaterThanOrEqual(top[1].logprob);
  });

  it('stops at a stop string and names it', async () => {
    const free = await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 16 }) });
    const decoder = new StreamDecoder(tokenizer);
    const deltas = free.tokens.map((t) => decoder.push(t.id));
    const pick = deltas.findIndex((d, i) => i >= 2 && d.length > 0 && !d.includes('\uFFFD'));
    expect(pick).toBeGreaterThanOrEqual(0);
    const stop = deltas[pick];
    let text = '';
    const expectedLength = deltas.findIndex((d) => (text += d).includes(stop)) + 1;
    const stopped = await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 16, stopStrings: [stop] }) });
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.stopString).toBe(stop);
    expect(stopped.tokens).toHaveLength(expectedLength);
  });

  it("reports each sampled token's logprob as the model's own (temperature 1)", async () => {
    const r = await engine.generate({ promptIds: prompt, sampling: sampling({ temperature: 1, seed: 5, maxTokens: 10 }) });
    const [lp] = await engine.logprobs([[...prompt, ...r.tokens.map((t) => t.id)]]);
    const tail = lp.slice(prompt.length);
    r.tokens.forEach((t, i) => expect(Math.abs(t.logprob - tail[i])).toBeLessThan(1e-3));
    expect(lp[0]).toBe(0);
  });

  it('continuous batching: concurrent requests interleave and give the tokens each gets alone (greedy)', async () => {
    const prompts = [prompt, tokenizer.encode('a much longer prompt, with commas'), tokenizer.encode('x')];
    const maxTokens = [14, 6, 10];
    const alone = [];
    for (let i = 0; i < 3; i++) alone.push((await engine.generate({ promptIds: prompts[i], sampling: sampling({ maxTokens: maxTokens[i] }) })).tokens.map((t) => t.id));
    const order: number[] = [];
    const together = await Promise.all(prompts.map((p, i) => engine.generate({ promptIds: p, sampling: sampling({ maxTokens: maxTokens[i] }) }, () => order.push(i))));
    expect(together.map((r) => r.tokens.map((t) => t.id))).toEqual(alone);
    // Request 1 finished (6 tokens) while request 0 was still running: they shared decode steps.
    expect(order.lastIndexOf(1)).toBeLessThan(order.lastIndexOf(0));
    expect(order.indexOf(2)).toBeLessThan(order.lastIndexOf(0));
  });

  it('a bad prompt admitted together with good ones fails alone', async () => {
    const good = (await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 5 }) })).tokens.map((t) => t.id);
    const [a, bad, b] = await Promise.allSettled([prompt, [...prompt, 999], prompt].map((p) => engine.generate({ promptIds: p, sampling: sampling({ maxTokens: 5 }) })));
    expect(bad).toMatchObject({ status: 'rejected', reason: { name: 'InvalidConfigError' } });
    for (const r of [a, b]) expect(r.status === 'fulfilled' && r.value.tokens.map((t) => t.id)).toEqual(good);
  });

  it('a prompt longer than the context is refused with ContextLengthError', async () => {
    const long = Array.from({ length: 60 }, () => 97);
    await expect(engine.generate({ promptIds: long, sampling: sampling() })).rejects.toMatchObject({ name: 'ContextLengthError' });
  });

  it('generation stops at the context length', async () => {
    const r = await engine.generate({ promptIds: Array.from({ length: 40 }, () => 97), sampling: sampling({ maxTokens: 100 }) });
    expect(r.finishReason).toBe('length');
    expect(40 + r.tokens.length).toBeLessThanOrEqual(48);
  });

  it('an aborted request ends with finishReason "cancelled"', async () => {
    const ac = new AbortController();
    let seen = 0;
    const r = await engine.generate({ promptIds: prompt, sampling: sampling({ maxTokens: 40 }) }, () => {
      if (++seen === 3) ac.abort();
    }, ac.signal);
    expect(r.finishReason).toBe('cancelled');
    expect(r.tokens.length).toBe(3);
  });

  it('rejects bad sampling parameters by name', async () => {
    await expect(engine.generate({ promptIds: prompt, sampling: sampling({ topP: 0 }) })).rejects.toMatchObject({ name: 'InvalidSamplingError' });
  });
});

describe('weights', () => {
  // A step changes the weights synchronously once it starts: a read asked for meanwhile (a publish of the weights
  // racing the next step) gets them after it, and the engine's version says so.
  it('a read asked for while a step is under way gets the weights after it, never a mix', async () => {
    const before = await engine.getWeights();
    const tokens = Array.from({ length: 20 }, (_, i) => (i * 7 + 5) % 250);
    const mask = tokens.map((_, i) => (i >= 6 ? 1 : 0));
    const [oldLogprobs] = await engine.logprobs([tokens]);
    const step = engine.trainStep([{ tokens, lossMask: mask, advantages: mask, oldLogprobs }], { learningRate: 1e-2, lossDivisor: 1 });
    const during = engine.getWeights();
    const { policyVersion } = await step;
    const after = await engine.getWeights();
    expect(await during).toEqual(after);
    expect(after).not.toEqual(before);
    expect(engine.info.policyVersion).toBe(policyVersion);
  });
});
