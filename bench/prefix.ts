/**
 * Prefix caching on a multi-turn agent conversation: each turn's prompt is the previous prompt, the model's answer
 * and a tool result, so all but the new part was computed before. The same conversation runs on an engine with the
 * prefix cache and on one without (prefixCacheBytes: 0), turn by turn, in one process: prefill time per turn,
 * whole-episode time, and whether both sampled the same tokens.
 *
 * Model: the default bench model (bench/model.ts) with a 4096-token context. `--turns N` (default 10).
 */
import type { DecoderConfig } from '../worker/common/engine.ts';
import { createEngineFromWeights } from '../worker/engine.ts';
import { initWeights } from '../worker/model.ts';
import { BENCH_CONFIG } from './model.ts';
import { type BenchContext, formatTable, type Row } from './report.ts';

const CONFIG: DecoderConfig = { ...BENCH_CONFIG, max_position_embeddings: 4096 };
const SYSTEM_PROMPT_TOKENS = 600;
const ANSWER_TOKENS = 32;
const TOOL_RESULT_TOKENS = 150;

const filler = (n: number, seed: number) => Array.from({ length: n }, (_, i) => (i * 31 + seed * 17) % 256);

export default async function prefixBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const turnsArg = ctx.args.indexOf('--turns');
  const turns = turnsArg >= 0 ? Number(ctx.args[turnsArg + 1]) : 10;
  const weights = initWeights(CONFIG, 1);
  const cached = await createEngineFromWeights({ name: 'cached', config: CONFIG, weights, tokenizer: null, seed: 1 });
  const plain = await createEngineFromWeights({ name: 'plain', config: CONFIG, weights, tokenizer: null, seed: 1, prefixCacheBytes: 0 });
  // Warm-up (JIT, kernels) on both, on a prompt the conversation never continues.
  for (const engine of [cached, plain]) await engine.generate({ promptIds: filler(SYSTEM_PROMPT_TOKENS, 99), sampling: { maxTokens: 4, temperature: 0, topP: 1, topK: 0, stopTokenIds: [], stopStrings: [], topLogprobs: 0 } });
  ctx.log(`backend ${cached.info.backend.name}; ${turns} turns, +${ANSWER_TOKENS} answer and +${TOOL_RESULT_TOKENS} tool tokens per turn`);

  const rows: Row[] = [];
  let prompt = filler(SYSTEM_PROMPT_TOKENS, 0);
  let sameTokens = true;
  let cachedMs = 0;
  let plainMs = 0;
  for (let turn = 0; turn < turns; turn++) {
    const request = { promptIds: prompt, sampling: { maxTokens: ANSWER_TOKENS, temperature: 1, topP: 1, topK: 0, seed: turn, stopTokenIds: [], stopStrings: [], topLogprobs: 0 } };
    let t0 = performance.now();
    const a = await cached.generate(request);
    const aMs = performance.now() - t0;
    t0 = performance.now();
    const b = await plain.generate(request);
    const bMs = performance.now() - t0;
    cachedMs += aMs;
    plainMs += bMs;
    sameTokens &&= a.tokens.every((t, i) => t.id === b.tokens[i]?.id) && a.tokens.length === b.tokens.length;
    rows.push({
      turn: turn + 1,
      prompt_tokens: prompt.length,
      cached_tokens: a.cachedPromptTokens ?? 0,
      prefill_ms_cached: round(a.timings.prefillMs),
      prefill_ms_uncached: round(b.timings.prefillMs),
      prefill_speedup: round(b.timings.prefillMs / a.timings.prefillMs, 2),
      turn_ms_cached: round(aMs),
      turn_ms_uncached: round(bMs),
    });
    ctx.log(`turn ${turn + 1}/${turns}: ${prompt.length} prompt tokens, ${a.cachedPromptTokens ?? 0} cached`);
    prompt = [...prompt, ...a.tokens.map((t) => t.id), ...filler(TOOL_RESULT_TOKENS, turn + 1)];
    if (prompt.length + ANSWER_TOKENS + 1 > CONFIG.max_position_embeddings) break;
  }
  await cached.close();
  await plain.close();
  process.stdout.write(formatTable(rows) + '\n');
  const later = rows.slice(1);
  const sum = (key: string) => later.reduce((total, r) => total + (r[key] as number), 0);
  return {
    backend: cached.info.backend.name,
    turns: rows.length,
    final_prompt_tokens: rows[rows.length - 1].prompt_tokens,
    episode_ms_cached: round(cachedMs),
    episode_ms_uncached: round(plainMs),
    episode_speedup: round(plainMs / cachedMs, 2),
    prefill_speedup_after_first_turn: round(sum('prefill_ms_uncached') / sum('prefill_ms_cached'), 2),
    same_tokens: sameTokens,
    rows,
  };
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
