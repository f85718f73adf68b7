/**
 * The trainer engine's core, timed: peak matmul throughput of the backend, training throughput and MFU, and
 * decoding with and without the KV cache, alone and batched. About a minute on a 2-core machine.
 *
 * MFU uses the 6·N·tokens rule (forward 2N + backward 4N FLOPs per token, N = all parameters); attention's
 * T-dependent FLOPs are reported separately (`train_mfu_with_attention`, adding PaLM's 12·L·d·T per token).
 * Peak = the best of several 1024³ matmuls on the same backend.
 *
 * `decode_matmul_batching_gain_8` is what batching gains on the decode step's weight matmuls alone (8 rows vs 1): where
 * the backend's single-row matmul already runs near its peak, batched decoding cannot gain much more than this.
 *
 * On a shared machine wall-clock numbers drift with the other processes' load, so the ratios are also reported by
 * this process's CPU time (`*_cpu`: the backend is single-threaded, so CPU time is the work itself).
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig, SamplingParams } from '../worker/common/engine.ts';
import { createEngineFromWeights } from '../worker/engine.ts';
import { countParameters, forward, fuseWeights, initWeights, toParams } from '../worker/model.ts';
import { type BenchContext, formatTable } from './report.ts';

/** The default bench model (4 layers, d=256, context 256); bench/device/gpu-check.ts measures the same one. */
export const BENCH_CONFIG: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 264,
  hidden_size: 256,
  num_hidden_layers: 4,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: 32,
  intermediate_size: 768,
  max_position_embeddings: 256,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: true,
  attention_bias: false,
};

const greedy = (maxTokens: number): SamplingParams => ({ maxTokens, temperature: 0, topP: 1, topK: 0, stopTokenIds: [], stopStrings: [], topLogprobs: 0 });

/** Wall-clock and CPU milliseconds of `fn`. */
async function timed<T>(fn: () => Promise<T> | T): Promise<{ value: T; wallMs: number; cpuMs: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { value, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * What batching can gain on the decode step's weight matmuls alone (fused qkv, o, fused gate/up, down per layer, and
 * the head): 8 × time(1-row matmuls) ÷ time(8-row matmuls). The backend's kernels bound batched decoding by this
 * much wherever matmuls are most of a step.
 */
async function matmulBatchingGain(cfg: DecoderConfig, rowsAlone: number, rowsTogether: number): Promise<{ gain: number; aloneMs: number; togetherMs: number }> {
  const d = cfg.hidden_size;
  const qkvOut = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim;
  const shapes: [number, number][] = [
    [d, qkvOut],
    [cfg.num_attention_heads * cfg.head_dim, d],
    [d, 2 * cfg.intermediate_size],
    [cfg.intermediate_size, d],
  ];
  const weights = [...Array.from({ length: cfg.num_hidden_layers }, () => shapes).flat(), [d, cfg.vocab_size] as [number, number]].map(([i, o]) => tf.randomNormal([i, o]) as tf.Tensor2D);
  const timeRows = async (rows: number): Promise<number> => {
    const inputs = weights.map((w) => tf.randomNormal([rows, w.shape[0]]) as tf.Tensor2D);
    const once = async () => {
      for (let i = 0; i < weights.length; i++) tf.matMul(inputs[i], weights[i]).dispose();
      const probe = tf.matMul(inputs[0], weights[0]); // reading one result waits for every queued matmul
      await probe.data();
      probe.dispose();
    };
    await once();
    let best = Infinity;
    for (let round = 0; round < 5; round++) {
      const t0 = performance.now();
      for (let i = 0; i < 20; i++) await once();
      best = Math.min(best, (performance.now() - t0) / 20);
    }
    inputs.forEach((t) => t.dispose());
    return best;
  };
  const aloneMs = await timeRows(rowsAlone);
  const togetherMs = await timeRows(rowsTogether);
  weights.forEach((t) => t.dispose());
  return { gain: (rowsTogether * aloneMs) / (rowsAlone * togetherMs), aloneMs, togetherMs };
}

/** Peak GFLOP/s of a 1024³ matmul, by wall clock and by CPU time (best of several). */
async function peakMatmulGflops(): Promise<{ wall: number; cpu: number }> {
  const n = 1024;
  const a = tf.randomNormal([n, n]);
  const b = tf.randomNormal([n, n]);
  let bestWall = Infinity;
  let bestCpu = Infinity;
  for (let i = 0; i < 6; i++) {
    const { wallMs, cpuMs } = await timed(async () => {
      const c = tf.matMul(a, b);
      await c.data(); // not dataSync: WebGPU under Node reads asynchronously only
      c.dispose();
    });
    bestWall = Math.min(bestWall, wallMs);
    bestCpu = Math.min(bestCpu, cpuMs);
  }
  a.dispose();
  b.dispose();
  const flops = 2 * n ** 3;
  return { wall: flops / (bestWall / 1000) / 1e9, cpu: flops / (bestCpu / 1000) / 1e9 };
}

export default async function modelBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const cfg = BENCH_CONFIG;
  const params = countParameters(cfg);
  const engine = await createEngineFromWeights({ name: 'bench', config: cfg, weights: initWeights(cfg, 1), tokenizer: null, seed: 1 });
  const backend = engine.info.backend.name;
  const passedOver = engine.info.backend.passedOver.map((p) => `${p.name}: ${p.reason}`).join('; ');
  ctx.log(`model: ${cfg.num_hidden_layers} layers, d=${cfg.hidden_size}, heads ${cfg.num_attention_heads}/${cfg.num_key_value_heads}, ff ${cfg.intermediate_size}, vocab ${cfg.vocab_size}, context ${cfg.max_position_embeddings}, ${(params / 1e6).toFixed(2)}M params; backend ${backend}`);

  const peak = await peakMatmulGflops();
  const gflops = peak.wall;
  ctx.log(`peak matmul: ${gflops.toFixed(1)} GFLOP/s (${peak.cpu.toFixed(1)} by CPU time)`);

  // Training: 8 rows × 256 tokens per step, one micro-batch.
  const rows = 8;
  const seqLen = cfg.max_position_embeddings;
  const samples = Array.from({ length: rows }, (_, r) => {
    const tokens = Array.from({ length: seqLen }, (_, i) => (r * 31 + i * 7) % 256);
    return { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map((_, i) => ((i + r) % 3) - 1), oldLogprobs: tokens.map(() => -5.5) };
  });
  const trainOpts = { loss: 'ppo' as const, microBatchTokens: rows * seqLen, learningRate: 1e-4 };
  await engine.trainStep(samples, trainOpts); // warm-up
  const steps = 2;
  const train = await timed(async () => {
    for (let i = 0; i < steps; i++) await engine.trainStep(samples, trainOpts);
  });
  const trainMs = train.wallMs;
  const trainTokensPerS = (steps * rows * seqLen) / (trainMs / 1000);
  const trainMfuCpu = (6 * params * ((steps * rows * seqLen) / (train.cpuMs / 1000))) / (peak.cpu * 1e9);
  const flopsPerToken = 6 * params;
  const attnFlopsPerToken = 12 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * seqLen;
  const trainMfu = (flopsPerToken * trainTokensPerS) / (gflops * 1e9);
  const trainMfuWithAttention = ((flopsPerToken + attnFlopsPerToken) * trainTokensPerS) / (gflops * 1e9);
  ctx.log(`train: ${(trainMs / steps).toFixed(0)} ms/step, ${trainTokensPerS.toFixed(0)} tokens/s`);

  // Decoding positions 96..159 of one sequence, with the KV cache (engine) and without (full forward per token).
  const prompt = Array.from({ length: 96 }, (_, i) => (i * 13) % 256);
  const newTokens = 64;
  await engine.generate({ promptIds: prompt, sampling: greedy(4) }); // warm-up
  const cached = await engine.generate({ promptIds: prompt, sampling: greedy(newTokens) });
  const cachedTps = cached.tokens.length / (cached.timings.decodeMs / 1000);

  const p = toParams(initWeights(cfg, 1));
  const w = fuseWeights(cfg, p);
  const seq = [...prompt];
  const uncachedSteps = 16;
  const t0 = performance.now();
  for (let i = 0; i < uncachedSteps; i++) {
    const logits = tf.tidy(() => tf.slice(forward(cfg, w, Int32Array.from(seq), 1, seq.length), [seq.length - 1, 0], [1, cfg.vocab_size]));
    const row = await logits.data();
    logits.dispose();
    let best = 0;
    for (let j = 1; j < row.length; j++) if (row[j] > row[best]) best = j;
    seq.push(best);
  }
  const uncachedTps = uncachedSteps / ((performance.now() - t0) / 1000);

  // Batched decoding: 8 concurrent requests vs one alone (aggregate tokens/s). Short prompts keep prefill out of
  // the comparison; best of two rounds each, interleaved, because a shared machine's load drifts.
  const batch = 8;
  const short = (i: number) => Array.from({ length: 8 }, (_, j) => (i * 17 + j * 5) % 256);
  let batchedTps = 0;
  let aloneTps = 0;
  let batchedTpsCpu = 0;
  let aloneTpsCpu = 0;
  for (let round = 0; round < 2; round++) {
    const together = await timed(() => Promise.all(Array.from({ length: batch }, (_, i) => engine.generate({ promptIds: short(i), sampling: greedy(newTokens) }))));
    const tokens = together.value.reduce((a, r) => a + r.tokens.length, 0);
    batchedTps = Math.max(batchedTps, tokens / (together.wallMs / 1000));
    batchedTpsCpu = Math.max(batchedTpsCpu, tokens / (together.cpuMs / 1000));
    const alone = await timed(() => engine.generate({ promptIds: short(0), sampling: greedy(newTokens) }));
    aloneTps = Math.max(aloneTps, alone.value.tokens.length / (alone.wallMs / 1000));
    aloneTpsCpu = Math.max(aloneTpsCpu, alone.value.tokens.length / (alone.cpuMs / 1000));
  }
  await engine.close();
  const matmuls = await matmulBatchingGain(cfg, 1, batch);
  ctx.log(`decode-step matmuls: ${matmuls.aloneMs.toFixed(2)} ms for 1 row, ${matmuls.togetherMs.toFixed(2)} ms for ${batch}`);

  const result = {
    backend,
    backend_reason: engine.info.backend.reason,
    backend_passed_over: passedOver || 'none',
    params,
    matmul_gflops: round(gflops),
    matmul_gflops_cpu: round(peak.cpu),
    train_tokens_per_s: round(trainTokensPerS),
    train_mfu: round(trainMfu, 3),
    train_mfu_with_attention: round(trainMfuWithAttention, 3),
    train_mfu_cpu: round(trainMfuCpu, 3),
    mfu_flops: '6·N per token (N = all parameters); with_attention adds 12·L·d·T',
    decode_tokens_per_s_cached: round(cachedTps),
    decode_tokens_per_s_uncached: round(uncachedTps),
    kv_cache_speedup: round(cachedTps / uncachedTps, 2),
    batched_decode_tokens_per_s_8: round(batchedTps),
    batched_decode_speedup_8: round(batchedTps / aloneTps, 2),
    batched_decode_speedup_8_cpu: round(batchedTpsCpu / aloneTpsCpu, 2),
    decode_matmul_batching_gain_8: round(matmuls.gain, 2),
    decode_matmul_ms_1_row: round(matmuls.aloneMs, 3),
    decode_matmul_ms_8_rows: round(matmuls.togetherMs, 3),
  };
  const table = Object.entries(result).map(([metric, value]) => ({ metric, value }));
  process.stdout.write(formatTable(table) + '\n');
  return result;
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
