/**
 * Timeline merging, measured: agent episodes run through the real gateway and context tracker (a real peer with
 * its SQLite store; the agent speaks HTTP), then one real training step on the same data both ways — one sample
 * per call (naive) and the merged timelines — with the real trainer engine.
 *
 *   npm run bench -- merge [--json] [--scale S] [--driver gateway|tracker] [--turns N]
 *
 * Workloads: 5, 25 and 50 turns; 25 turns is AppWorld-like (≈1,000 prompt tokens of system + task, ≈150-token
 * observations, ≈60-token actions). `--scale` multiplies every token size (default 0.1 so that the naive step
 * finishes in minutes on a 2-core CPU); token ratios barely depend on it, and `--scale 1` runs the full sizes.
 * `--driver tracker` skips the gateway and drives the tracker directly (no sampling; faster); `--turns N` runs only
 * the workload with N turns.
 *
 * Model: a 2-layer, width-64 decoder (4 heads, 2 KV heads) over the builtin byte tokenizer, randomly initialised,
 * so a token is a byte and the sizes above are exact.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DecoderConfig, TrainOptions, TrainSample } from '../worker/common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from '../worker/engine.ts';
import { initWeights } from '../worker/model.ts';
import type { ChatMessage } from '../worker/tokenizer/types.ts';
import { toMergeCalls } from '../swarm/common/timeline/call.ts';
import { mergeTimelines, type MergeCall } from '../swarm/common/timeline/merge.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import { getCalls } from '../swarm/node/store/episode-reads.ts';
import { timelineSample } from '../swarm/node/training/advantages.ts';
import {
  APPWORLD_LIKE,
  observationMessage,
  openingMessages,
  runSyntheticEpisode,
  type AgentWorkload,
} from '../swarm/node/training/testing/synthetic-agent.ts';
import { formatTable, type BenchContext, type Row } from './report.ts';

const MODEL: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 264,
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  intermediate_size: 192,
  max_position_embeddings: 16384,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: true,
  attention_bias: false,
};
const MODEL_LABEL = 'decoder 2 layers × width 64 (4 heads, 2 KV), byte vocabulary 264, random init';

const WORKLOADS: AgentWorkload[] = [
  { turns: 5, promptTokens: 1000, observationTokens: 150, actionTokens: 60 },
  APPWORLD_LIKE,
  // A long, chatty run: short observations and actions.
  { turns: 50, promptTokens: 1000, observationTokens: 60, actionTokens: 30 },
];

/** The loop's defaults (swarm/node/training/config.ts), with a tiny learning rate: the step is timed, not used. */
const TRAIN: Partial<TrainOptions> = {
  loss: 'ppo',
  normalization: 'token-sum',
  clipLow: 0.2,
  clipHigh: 0.2,
  microBatchTokens: 4096,
  learningRate: 1e-6,
  weightDecay: 0,
  maxGradNorm: 1,
  // One episode per step: the same divisor for both packings, so merged and naive compute the same update.
  lossDivisor: 1,
};

type Driver = 'gateway' | 'tracker';

/**
 * Token sizes × 0.1 by default: the naive step of the 50-turn run processes ~50k tokens, a few minutes on 2 CPU
 * cores with the wasm backend. Ratios are what this benchmark reports; they hold at larger scales.
 */
const DEFAULT_SCALE = 0.1;

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

function scaled(w: AgentWorkload, scale: number): AgentWorkload {
  const s = (n: number) => Math.max(1, Math.round(n * scale));
  return {
    turns: w.turns,
    promptTokens: s(w.promptTokens),
    observationTokens: s(w.observationTokens),
    actionTokens: s(w.actionTokens),
  };
}

/** One episode through a real peer: the agent calls the OpenAI-compatible gateway and reports its reward. */
async function gatewayEpisode(
  peer: PeerRuntime,
  workload: AgentWorkload,
  seed: number,
): Promise<MergeCall[]> {
  const post = async (url: string, token: string, body: unknown) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (!res.ok) throw new Error(`${url}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const episode = (await post(`http://127.0.0.1:${peer.port}/swarm/v1/episodes`, peer.token, {
    model: 'bench',
    taskId: `task-${seed}`,
  })) as {
    episodeId: string;
    baseUrl: string;
    apiKey: string;
  };
  const messages: ChatMessage[] = openingMessages(workload, seed);
  for (let turn = 0; turn < workload.turns; turn++) {
    const answer = (await post(`${episode.baseUrl}/chat/completions`, episode.apiKey, {
      model: 'bench',
      messages,
      max_tokens: workload.actionTokens,
    })) as {
      choices: { message: ChatMessage }[];
    };
    // The agent keeps the assistant message exactly as returned (content and any tool calls), as real agents do.
    messages.push(answer.choices[0].message);
    messages.push(observationMessage(workload, seed, turn));
  }
  await post(`http://127.0.0.1:${peer.port}/swarm/v1/episodes/${episode.episodeId}/end`, peer.token, {
    reward: 1,
  });
  return toMergeCalls(getCalls(peer.db, episode.episodeId));
}

async function timedStep(engine: LocalEngine, samples: TrainSample[]): Promise<number> {
  const started = performance.now();
  await engine.trainStep(samples, TRAIN);
  return performance.now() - started;
}

export default async function merge(ctx: BenchContext): Promise<Record<string, unknown>> {
  const scale = Number(argValue(ctx.args, '--scale') ?? DEFAULT_SCALE);
  const onlyTurns = argValue(ctx.args, '--turns');
  const driver = (argValue(ctx.args, '--driver') ?? 'gateway') as Driver;
  if (!(scale > 0) || !['gateway', 'tracker'].includes(driver))
    throw new Error('usage: merge [--scale S>0] [--driver gateway|tracker]');
  const workloads = WORKLOADS.filter((w) => onlyTurns === undefined || w.turns === Number(onlyTurns)).map(
    (w) => scaled(w, scale),
  );
  if (workloads.length === 0)
    throw new Error(`no workload has ${onlyTurns} turns (${WORKLOADS.map((w) => w.turns).join(', ')})`);
  const weights = initWeights(MODEL, 1);

  // 1. Episodes.
  const episodes: MergeCall[][] = [];
  if (driver === 'gateway') {
    const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bench-merge-'));
    const peer = await PeerRuntime.start({
      dataDir,
      port: 0,
      consoleLogLevel: 'warn',
      // The builtin byte tokenizer and template, with the bench model's weights (in-process engine).
      models: [{ name: 'bench', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 4 }],
      startEngine: () => createEngineFromWeights({ name: 'bench', config: MODEL, weights, tokenizer: null }),
    });
    try {
      for (const [i, w] of workloads.entries()) {
        ctx.log(`episode: ${w.turns} turns through the gateway …`);
        episodes.push(await gatewayEpisode(peer, w, i + 1));
      }
    } finally {
      await peer.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  } else {
    for (const [i, w] of workloads.entries())
      episodes.push(toMergeCalls(runSyntheticEpisode(w, { seed: i + 1 }).calls));
  }

  // 2. One training step each way, on a fresh engine warmed up on a short sample.
  const engine = await createEngineFromWeights({
    name: 'bench-trainer',
    config: MODEL,
    weights,
    tokenizer: null,
  });
  const warm = episodes[0][0];
  await engine.trainStep(
    mergeTimelines([warm], 'naive').timelines.map((t) => timelineSample(t, 1)),
    TRAIN,
  );
  const rows: Row[] = [];
  for (const [i, calls] of episodes.entries()) {
    const merged = mergeTimelines(calls, 'merged');
    const naive = mergeTimelines(calls, 'naive');
    const samples = (result: typeof merged) => result.timelines.map((t) => timelineSample(t, 1));
    ctx.log(
      `update: ${workloads[i].turns} turns, naive ${merged.savings.naiveTokens} tokens vs merged ${merged.savings.mergedTokens} …`,
    );
    const naiveMs = await timedStep(engine, samples(naive));
    const mergedMs = await timedStep(engine, samples(merged));
    rows.push({
      turns: workloads[i].turns,
      naive_tokens: merged.savings.naiveTokens,
      merged_tokens: merged.savings.mergedTokens,
      token_ratio: round(merged.savings.tokenRatio),
      naive_update_ms: Math.round(naiveMs),
      merged_update_ms: Math.round(mergedMs),
      update_time_ratio: round(naiveMs / mergedMs),
      merge_rate: merged.savings.mergeRate,
    });
  }
  await engine.close();

  const backend = engine.info.backend.name;
  process.stdout.write(
    `merge: ${driver === 'gateway' ? 'episodes through the real gateway + tracker' : 'episodes through the real tracker (no gateway)'}; backend ${backend}; scale ${scale}; model: ${MODEL_LABEL}\n`,
  );
  process.stdout.write(formatTable(rows) + '\n');
  return { workloads: rows, backend, driver, scale, model: MODEL_LABEL };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
