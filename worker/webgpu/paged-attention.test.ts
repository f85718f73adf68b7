/**
 * The paged KV cache (paged-kv-cache.ts) and its decode attention (paged-attention.ts) against plain attention on the
 * cpu backend: batches of sequences of different lengths (1, odd, over a page, many pages and tiles) whose pages are
 * interleaved in the pool, grouped queries (rep 1, 2, 7), head dims 8 and 64 (vec4 rows) and 6 (f32 rows), scores
 * large enough that the running max must rescale. Also: freed pages are reused and hold the new sequence's values;
 * a full pool refuses a batch by name and takes nothing (any backend); on webgpu a decode step of the tiny model gives
 * the per-sequence path's logits in fewer kernels (tf.profile), the engine decodes a batch of prompts of different
 * lengths through the paged kernels and device sampling (counted) to the wasm engine's tokens and logprobs, greedy
 * and sampled, and a decode step is one command buffer. Skips only without an adapter.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import type { BackendName, GenerateResult, SamplingParams } from '../common/engine.ts';
import { createEngineFromWeights } from '../engine.ts';
import { fuseWeights, initWeights, type ModelWeights, seededRandom, toParams } from '../model.ts';
import { devicePick, sampleToken } from '../sampler.ts';
import { decodeOnDevice, decodeOnDeviceSampled, decodePaged, decodePagedSampled, deviceDecodeWeights, disposeDeviceDecodeWeights, prefillOnDevice, prefillPaged } from '../tensor-decode.ts';
import { sampling, tinyByteConfig } from '../testing/configs.ts';
import { asWebGpu } from './gpu.ts';
import { PAGE_SLOTS, PagedKvPool, PagedKvPoolFullError, pagedStats } from './paged-kv-cache.ts';
import { sampleStats } from './sample.ts';
import { webgpuSkipReason, worstRatio } from './testing/gpu.ts';
import { fillPool, PAGED_CASES, PAGED_TOL, type PagedCase, pagedCaseChecks, pagedCaseName, pagedDataOf, pagedDecodeStep, pagedReference, pagedSeed } from './testing/paged-checks.ts';

const skipReason = await webgpuSkipReason();

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

  PAGED_CASES.forEach((c, i) => {
    it(`matches plain attention: ${pagedCaseName(c)}`, async () => {
      const before = tf.memory().numTensors;
      for (const check of await pagedCaseChecks(c, pagedSeed(i))) expect(check.ratio, check.name).toBeLessThanOrEqual(1);
      expect(tf.memory().numTensors).toBe(before); // the pool, the append's placeholder, the table, the inputs: all released
    });
  });

  it('reuses the pages of a finished sequence, holding the new sequence values', async () => {
    const c: PagedCase = { lengths: [40, 23], kvh: 2, rep: 2, hd: 8, qScale: 0.5 };
    const first = pagedDataOf(c, 7);
    const second = pagedDataOf(c, 8);
    const want = await pagedReference(c, second);
    await tf.setBackend('webgpu');
    const pool = new PagedKvPool({ layers: 1, kvHeads: c.kvh, headDim: c.hd }, 6); // 3 + 2 pages used, one spare
    const seqs = c.lengths.map(() => pool.sequence());
    fillPool(pool, seqs, c, first);
    await pagedDecodeStep(pool, seqs, c, first);
    const held = seqs.map((s) => [...s.pages]);
    seqs.forEach((s) => pool.release(s));
    expect(pool.freePages).toBe(6);
    const again = c.lengths.map(() => pool.sequence());
    fillPool(pool, again, c, second);
    expect(new Set(again.flatMap((s) => s.pages))).toEqual(new Set(held.flat())); // the freed pages, not the spare
    const got = await pagedDecodeStep(pool, again, c, second);
    got.forEach((g, b) => expect(worstRatio(g, want[b], PAGED_TOL.atol, PAGED_TOL.rtol), `sequence ${b}`).toBeLessThanOrEqual(1));
    pool.dispose();
  });
});

/** Prompts of different lengths (one, under a page, over one, near two) and tokens enough to cross page boundaries. */
const PROMPTS = [[5], [100, 2, 3, 9, 41], Array.from({ length: 17 }, (_, i) => (i * 11) % 250), Array.from({ length: 30 }, (_, i) => (i * 7 + 3) % 250)];
const MAX_TOKENS = 16;

/** Generation of PROMPTS, all at once, on a fresh tiny engine: greedy, or each prompt by one of SAMPLED; `second` over the second prompt's. */
async function generateBatch(backend: BackendName, sampled = false, second: Partial<SamplingParams> = {}): Promise<GenerateResult[]> {
  const cfg = tinyByteConfig();
  const engine = await createEngineFromWeights({ name: 'paged-test', config: cfg, weights: initWeights(cfg, 3), tokenizer: null, backend, seed: 1 });
  try {
    return await Promise.all(PROMPTS.map((promptIds, i) => engine.generate({ promptIds, sampling: sampling({ maxTokens: MAX_TOKENS, ...(sampled ? SAMPLED[i % SAMPLED.length] : {}), ...(i === 1 ? second : {}) }) })));
  } finally {
    await engine.close();
  }
}

/** Seeded sampling, one mode per prompt (the tiny model's distributions are wide: temperature alone varies a lot). */
const SAMPLED: Partial<SamplingParams>[] = [
  { temperature: 1, seed: 11 },
  { temperature: 0.9, topK: 8, seed: 12 },
  { temperature: 1.1, topP: 0.8, seed: 13 },
  { temperature: 1, topK: 20, topP: 0.9, seed: 14 },
];

/** The tiny byte model on webgpu: its fused weights and the decode layers' device weights. */
async function tinyModelOnDevice() {
  await selectBackend('webgpu', { syncReads: false });
  const cfg = tinyByteConfig();
  const params = toParams(initWeights(cfg, 3));
  const w = tf.tidy(() => fuseWeights(cfg, params) as unknown as tf.TensorContainer) as unknown as ModelWeights;
  return { cfg, w, dw: deviceDecodeWeights(cfg, params) };
}

/** The engine's tokens equal the wasm engine's, logprobs within f32's reach. */
function expectSameTokens(gpu: GenerateResult[], wasm: GenerateResult[]): void {
  gpu.forEach((r, i) => {
    expect(r.tokens.map((t) => t.id), `prompt ${i}`).toEqual(wasm[i].tokens.map((t) => t.id));
    r.tokens.forEach((t, k) => expect(Math.abs(t.logprob - wasm[i].tokens[k].logprob), `prompt ${i}, token ${k}`).toBeLessThan(1e-3));
  });
}

describe.skipIf(skipReason !== null)(`paged decoding of the model on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('gives the per-sequence path logits in fewer kernels per step', async () => {
    const { cfg, w, dw } = await tinyModelOnDevice();
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
    const wasm = await generateBatch('wasm');
    const before = { ...pagedStats };
    const sampledBefore = { ...sampleStats };
    const gpu = await generateBatch('webgpu');
    const layers = tinyByteConfig().num_hidden_layers;
    // The first token comes from the prefill; the others from decode steps of the whole batch (one dispatch per layer).
    expect(pagedStats.attention - before.attention).toBe(layers * (MAX_TOKENS - 1));
    expect(pagedStats.append - before.append).toBe(layers); // the four prompts prefilled together
    // Every token was picked on the device, one dispatch for the batch: the prefill's and each step's.
    expect(sampleStats.dispatches - sampledBefore.dispatches).toBe(MAX_TOKENS);
    expect(sampleStats.rows - sampledBefore.rows).toBe(PROMPTS.length * MAX_TOKENS);
    expectSameTokens(gpu, wasm);
  });

  it('samples on the device (temperature, top-k, top-p, seeded) to the wasm engine tokens', async () => {
    const wasm = await generateBatch('wasm', true);
    const sampledBefore = { ...sampleStats };
    const gpu = await generateBatch('webgpu', true);
    expect(sampleStats.dispatches - sampledBefore.dispatches).toBe(MAX_TOKENS);
    expectSameTokens(gpu, wasm);
    // Not all greedy: sampling changed some token somewhere.
    const greedy = await generateBatch('wasm');
    expect(wasm.map((r) => r.tokens.map((t) => t.id))).not.toEqual(greedy.map((r) => r.tokens.map((t) => t.id)));
  });

  it("samples every row on the device when a request wants top logprobs, reading only that row's logits: the wasm engine's tokens and alternatives", async () => {
    const wasm = await generateBatch('wasm', true, { topLogprobs: 3 });
    const sampledBefore = { ...sampleStats };
    const gpu = await generateBatch('webgpu', true, { topLogprobs: 3 });
    // Each decode step sampled the whole batch on the device; the prefill (a group with that request) read logits.
    expect(sampleStats.dispatches - sampledBefore.dispatches).toBe(MAX_TOKENS - 1);
    expectSameTokens(gpu, wasm);
    gpu[1].tokens.forEach((t, k) => {
      const want = wasm[1].tokens[k].top!;
      expect(t.top?.map((e) => e.id), `token ${k}`).toEqual(want.map((e) => e.id));
      t.top!.forEach((e, j) => expect(Math.abs(e.logprob - want[j].logprob)).toBeLessThan(1e-3));
    });
    expect(gpu.filter((_, i) => i !== 1).every((r) => r.tokens.every((t) => t.top === undefined))).toBe(true);
  });

  it("the per-sequence device caches sample on the device too: the host sampler's tokens on their logits", async () => {
    const { cfg, w, dw } = await tinyModelOnDevice();
    const [plain, sampled] = [await prefillOnDevice(cfg, w, PROMPTS), await prefillOnDevice(cfg, w, PROMPTS)];
    const s = sampling({ temperature: 1, topK: 30, topP: 0.95 });
    const [hostRand, deviceRand] = [seededRandom(4), seededRandom(4)];
    let [a, b] = [PROMPTS.map((p) => p[0]), PROMPTS.map((p) => p[0])];
    for (let step = 0; step < 4; step++) {
      const logits = await decodeOnDevice(cfg, w, dw, plain.map((p) => p.cache), a);
      const v = cfg.vocab_size;
      a = a.map((_, i) => sampleToken(logits.subarray(i * v, (i + 1) * v), s, hostRand).id);
      const picks = b.map(() => devicePick(s, deviceRand));
      b = (await decodeOnDeviceSampled(cfg, w, dw, sampled.map((p) => p.cache), b, picks)).tokens.map((t) => t.id);
      expect(b, `step ${step}`).toEqual(a);
    }
    for (const p of [...plain, ...sampled]) p.cache.dispose();
    disposeDeviceDecodeWeights(dw);
    tf.dispose(w as unknown as tf.TensorContainer);
  });

  it('records a decode step into one command buffer, submitted by its one small read', async () => {
    const { cfg, w, dw } = await tinyModelOnDevice();
    const pool = new PagedKvPool({ layers: cfg.num_hidden_layers, kvHeads: cfg.num_key_value_heads, headDim: cfg.head_dim }, 16);
    const paged = await prefillPaged(cfg, w, pool, PROMPTS);
    const gpu = asWebGpu(tf.backend());
    const submit = gpu.submitQueue.bind(gpu);
    let submits = 0;
    gpu.submitQueue = () => {
      submits++;
      submit();
    };
    try {
      const picks = PROMPTS.map(() => ({ invTemperature: 0, topK: 0, topP: 1, draw: 0 }));
      const { tokens } = await decodePagedSampled(cfg, w, dw, paged.map((p) => p.cache), PROMPTS.map((p) => p[0]), picks);
      expect(tokens).toHaveLength(PROMPTS.length);
    } finally {
      gpu.submitQueue = submit;
    }
    expect(submits).toBe(1);
    for (const p of paged) pool.release(p.cache);
    pool.dispose();
    disposeDeviceDecodeWeights(dw);
    tf.dispose(w as unknown as tf.TensorContainer);
  });
});
