/**
 * The trainer engine itself (LocalEngine: prefill, KV-cache decoding with continuous batching, logprobs, training
 * steps) on one backend, as JSON on the last stdout line, to compare backends run for run: the same seed gives the
 * same greedy tokens, and losses / gradient norms agree within float tolerance.
 *
 *   node --import tsx bench/device/engine-check.ts webgpu|wasm|cpu [--bench]
 *
 * Without --bench: a tiny model (seconds, even on lavapipe). With --bench: bench/model.ts's 3.2M-parameter model.
 */
import '../../p2p/polyfill.ts';
import type { BackendName, DecoderConfig, SamplingParams, TrainSample } from '../../worker/common/engine.ts';
import { createEngineFromWeights } from '../../worker/engine.ts';
import { initWeights } from '../../worker/model.ts';
import { tinyByteConfig } from '../../worker/testing/configs.ts';
import { BENCH_CONFIG } from '../model.ts';

const greedy = (maxTokens: number): SamplingParams => ({ maxTokens, temperature: 0, topP: 1, topK: 0, stopTokenIds: [], stopStrings: [], topLogprobs: 0 });

function trainingSamples(cfg: DecoderConfig, rows: number, len: number): TrainSample[] {
  return Array.from({ length: rows }, (_, r) => {
    const tokens = Array.from({ length: len }, (_, i) => (r * 31 + i * 7) % Math.min(256, cfg.vocab_size));
    return { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map((_, i) => ((i + r) % 3) - 1), oldLogprobs: tokens.map(() => -5.5) };
  });
}

export async function engineCheck(backend: BackendName, bench: boolean): Promise<Record<string, unknown>> {
  const cfg = bench ? BENCH_CONFIG : tinyByteConfig();
  const engine = await createEngineFromWeights({ name: 'check', config: cfg, weights: initWeights(cfg, 1), tokenizer: null, backend, seed: 1 });
  const prompts = Array.from({ length: 4 }, (_, i) => Array.from({ length: 6 + 3 * i }, (_, j) => (i * 17 + j * 5) % 256));
  const newTokens = bench ? 64 : 12;
  await engine.generate({ promptIds: prompts[0], sampling: greedy(2) }); // warm-up (shader compilation)

  const t0 = performance.now();
  const alone = await engine.generate({ promptIds: prompts[0], sampling: greedy(newTokens) });
  const aloneMs = performance.now() - t0;
  const t1 = performance.now();
  const together = await Promise.all(prompts.map((promptIds) => engine.generate({ promptIds, sampling: greedy(newTokens) })));
  const togetherMs = performance.now() - t1;
  const sampled = await engine.generate({ promptIds: prompts[1], sampling: { ...greedy(newTokens), temperature: 1, seed: 7 } });

  const scored = await engine.logprobs([[...prompts[0], ...alone.tokens.map((t) => t.id)]]);
  const samples = trainingSamples(cfg, bench ? 8 : 2, bench ? cfg.max_position_embeddings : 24);
  const t2 = performance.now();
  const first = await engine.trainStep(samples, { loss: 'ppo', learningRate: 1e-3 });
  const trainMs = performance.now() - t2;
  const second = await engine.trainStep(samples, { loss: 'ppo', learningRate: 1e-3 });
  const afterTraining = await engine.generate({ promptIds: prompts[0], sampling: greedy(newTokens) });
  await engine.close();

  const tokensOf = (r: { tokens: { id: number }[] }) => r.tokens.map((t) => t.id);
  return {
    backend: engine.info.backend.name,
    passedOver: engine.info.backend.passedOver,
    model: bench ? 'bench (3.2M)' : 'tiny',
    greedyTokens: tokensOf(alone),
    batchedTokens: together.map(tokensOf),
    sampledTokens: tokensOf(sampled),
    greedyLogprobs: alone.tokens.map((t) => t.logprob),
    scoredLogprobs: scored[0].slice(prompts[0].length),
    loss: [first.loss, second.loss],
    gradNorm: [first.gradNorm, second.gradNorm],
    entropy: [first.entropy, second.entropy],
    clipFraction: [first.clipFraction, second.clipFraction],
    tokensAfterTraining: tokensOf(afterTraining),
    decode_tokens_per_s: alone.tokens.length / (alone.timings.decodeMs / 1000),
    decode_wall_ms: aloneMs,
    batched_decode_tokens_per_s_4: together.reduce((a, r) => a + r.tokens.length, 0) / (togetherMs / 1000),
    first_train_step_ms: trainMs,
    train_step_ms: second.timeMs,
    train_tokens_per_s: samples.reduce((a, s) => a + s.tokens.length, 0) / (second.timeMs / 1000),
  };
}

// Run directly (not when bundled into gpu-check.cjs, where import.meta is empty, or imported).
if (import.meta.url && import.meta.url === `file://${process.argv[1]}`) {
  engineCheck((process.argv[2] ?? 'wasm') as BackendName, process.argv.includes('--bench')).then(
    (result) => console.log(JSON.stringify(result)),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
