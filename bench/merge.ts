/**
 * Timeline merging and tree training, measured: agent episodes run through the real gateway and context tracker (a
 * real peer with its SQLite store; the agent speaks HTTP), then one real training step on the same data each way —
 * one sample per call (naive), the merged timelines as padded rows (merged), and the merged timelines of the whole
 * batch as one prefix tree (tree: a group's shared context computed once) — with the real trainer engine.
 *
 *   npm run bench -- merge [--json] [--scale S] [--driver gateway|tracker] [--turns N] [--group N] [--micro-batch-tokens N]
 *                          [--model narrow|wide] [--skip-naive]
 *
 * Two tables: single episodes (one per workload), and GRPO groups — `--group` repeats (default 8) of one task run
 * together, sharing an AppWorld-like context of system prompt + API documentation (4,000 tokens at scale 1: the
 * AppWorld agent's prompt carries the documentation of the apps' APIs) and then acting and observing on their own.
 * The group table also reports the share of prompt tokens the rollouts took from the prefix cache, and checks in
 * the same run that the tree's loss and gradients equal one sample per call (each through its own forward).
 *
 * A micro-batch (`--micro-batch-tokens`, default the loop's 4,096) shares its own prefixes in its tree; once a
 * group's timelines are long against the budget each micro-batch holds one or two, and the opening they all share
 * is a trunk (worker/prefix-tree.ts planTreeRuns), computed once per step: `tree_tokens` (what the step computed)
 * counts it once, `trunk_tokens` is its size. The budget bounds activation memory; this bench's model needs little
 * per token.
 *
 * Workloads: 5, 25 and 50 turns; 25 turns is AppWorld-like (≈1,000 prompt tokens of system + task, ≈150-token
 * observations, ≈60-token actions). `--scale` multiplies every token size (default 0.1 so that the naive step
 * finishes in minutes on a 2-core CPU); token ratios barely depend on it, and `--scale 1` runs the full sizes.
 * `--driver tracker` skips the gateway and drives the tracker directly (no sampling; faster); `--turns N` runs only
 * the workload with N turns.
 *
 * Model (`--model`): `narrow` (default), a 2-layer, width-64 decoder (4 heads, 2 KV heads) over the builtin byte
 * tokenizer, randomly initialised, so a token is a byte and the sizes above are exact. At these lengths its attention
 * is most of a step, and attention is what the tree saves least (every generated token still attends to the whole
 * shared context): the time saved trails the tokens saved. `wide`: two layers of Qwen2.5-0.5B's shapes (width 896,
 * 14 heads of 64, 2 KV heads, MLP 4,864) over the same byte vocabulary, so each token's balance of projections and
 * MLP against attention is a real model's; its naive step takes hours on a CPU, so pair it with `--skip-naive`
 * (tree against merged only, no exactness check: the narrow run checks the same code) and a micro-batch of at most
 * 2,048 tokens (at 4,096 its activations outgrow the wasm heap: XNNPACK fails to create a matmul and the run aborts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DecoderConfig, TrainOptions, TrainSample } from '../worker/common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from '../worker/engine.ts';
import { initWeights } from '../worker/model.ts';
import { planTreeRuns, treeTokenCount } from '../worker/prefix-tree.ts';
import type { ChatMessage } from '../worker/tokenizer/types.ts';
import { toMergeCalls } from '../swarm/common/timeline/call.ts';
import { mergeTimelines, type MergeCall } from '../swarm/common/timeline/merge.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import { getCalls } from '../swarm/node/store/episode-reads.ts';
import { timelineSample } from '../swarm/node/training/advantages.ts';
import { engineLossAndGradients, relativeGradientError, tokenSumLossAndGradients } from '../swarm/node/training/testing/policy-gradient.ts';
import {
  APPWORLD_LIKE,
  observationMessage,
  openingMessages,
  runSyntheticEpisode,
  type AgentWorkload,
} from '../swarm/node/training/testing/synthetic-agent.ts';
import { QWEN2_5_0_5B } from './model.ts';
import { formatTable, type BenchContext, type Row } from './report.ts';

const NARROW: DecoderConfig = {
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
/** Two of Qwen2.5-0.5B's layers over the byte vocabulary (its 151,936-row embedding would be most of a step here). */
const WIDE: DecoderConfig = { ...QWEN2_5_0_5B, vocab_size: NARROW.vocab_size, num_hidden_layers: 2, max_position_embeddings: NARROW.max_position_embeddings };
const MODELS: Record<string, { config: DecoderConfig; label: string }> = {
  narrow: { config: NARROW, label: 'decoder 2 layers × width 64 (4 heads, 2 KV), byte vocabulary 264, random init' },
  wide: { config: WIDE, label: "decoder 2 layers of Qwen2.5-0.5B's shapes (width 896, 14 heads, 2 KV, MLP 4864), byte vocabulary 264, random init" },
};

const WORKLOADS: AgentWorkload[] = [
  { turns: 5, promptTokens: 1000, observationTokens: 150, actionTokens: 60 },
  APPWORLD_LIKE,
  // A long, chatty run: short observations and actions.
  { turns: 50, promptTokens: 1000, observationTokens: 60, actionTokens: 30 },
];

/** A group's shared opening: system prompt + API documentation + task (AppWorld-like; see the module comment). */
const GROUP_PROMPT_TOKENS = 4000;
const DEFAULT_GROUP_SIZE = 8;

/** The loop's defaults (swarm/node/training/config.ts), with a tiny learning rate: the step is timed, not used. */
const TRAIN: Partial<TrainOptions> & { microBatchTokens: number } = {
  loss: 'ppo',
  normalization: 'token-sum',
  clipLow: 0.2,
  clipHigh: 0.2,
  microBatchTokens: 4096,
  learningRate: 1e-6,
  weightDecay: 0,
  maxGradNorm: 1,
  // The same divisor for every packing, so naive, merged and tree compute the same update.
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

interface GatewayEpisode {
  calls: MergeCall[];
  promptTokens: number;
  /** Prompt tokens the gateway reported as served from the prefix cache (usage.prompt_tokens_details). */
  cachedTokens: number;
}

/** One episode through a real peer: the agent calls the OpenAI-compatible gateway and reports its reward. */
async function gatewayEpisode(
  peer: PeerRuntime,
  workload: AgentWorkload,
  seed: number,
  taskSeed = seed,
  reward = 1,
): Promise<GatewayEpisode> {
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
    taskId: `task-${taskSeed}`,
  })) as {
    episodeId: string;
    baseUrl: string;
    apiKey: string;
  };
  const messages: ChatMessage[] = openingMessages(workload, taskSeed);
  let promptTokens = 0;
  let cachedTokens = 0;
  for (let turn = 0; turn < workload.turns; turn++) {
    const answer = (await post(`${episode.baseUrl}/chat/completions`, episode.apiKey, {
      model: 'bench',
      messages,
      max_tokens: workload.actionTokens,
    })) as {
      choices: { message: ChatMessage }[];
      usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
    };
    promptTokens += answer.usage.prompt_tokens;
    cachedTokens += answer.usage.prompt_tokens_details?.cached_tokens ?? 0;
    // The agent keeps the assistant message exactly as returned (content and any tool calls), as real agents do.
    messages.push(answer.choices[0].message);
    messages.push(observationMessage(workload, seed, turn));
  }
  await post(`http://127.0.0.1:${peer.port}/swarm/v1/episodes/${episode.episodeId}/end`, peer.token, { reward });
  return { calls: toMergeCalls(getCalls(peer.db, episode.episodeId)), promptTokens, cachedTokens };
}

/** A group's rewards: spread so that every repeat has an advantage of its own. */
const groupReward = (i: number) => (i % 4) / 3;

async function timedStep(engine: LocalEngine, samples: TrainSample[], packing: 'rows' | 'tree' = 'rows'): Promise<{ ms: number; computedTokens: number }> {
  const started = performance.now();
  const metrics = await engine.trainStep(samples, { ...TRAIN, packing });
  return { ms: performance.now() - started, computedTokens: metrics.computedTokens ?? 0 };
}

interface GroupRun {
  workload: AgentWorkload;
  episodes: MergeCall[][];
  rewards: number[];
  /** Σ cached ÷ Σ prompt tokens over the group's calls (null without the gateway). */
  prefixCacheShare: number | null;
}

/** The group's repeats of one task, all at once through the gateway (as a runner starts a group). */
async function gatewayGroup(peer: PeerRuntime, workload: AgentWorkload, taskSeed: number, size: number): Promise<GroupRun> {
  const rewards = Array.from({ length: size }, (_, i) => groupReward(i));
  const runs = await Promise.all(rewards.map((reward, i) => gatewayEpisode(peer, workload, taskSeed * 100 + i, taskSeed, reward)));
  const prompt = runs.reduce((a, r) => a + r.promptTokens, 0);
  return { workload, episodes: runs.map((r) => r.calls), rewards, prefixCacheShare: prompt > 0 ? runs.reduce((a, r) => a + r.cachedTokens, 0) / prompt : 0 };
}

function trackerGroup(workload: AgentWorkload, taskSeed: number, size: number): GroupRun {
  const rewards = Array.from({ length: size }, (_, i) => groupReward(i));
  const episodes = rewards.map((_, i) => toMergeCalls(runSyntheticEpisode(workload, { seed: taskSeed * 100 + i, taskSeed }).calls));
  return { workload, episodes, rewards, prefixCacheShare: null };
}

/** The group's samples in one mode, each episode's timelines carrying its GRPO advantage. */
function groupSamples(group: GroupRun, mode: 'naive' | 'merged'): TrainSample[] {
  const mean = group.rewards.reduce((a, r) => a + r, 0) / group.rewards.length;
  const std = Math.sqrt(group.rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / group.rewards.length);
  return group.episodes.flatMap((calls, i) => mergeTimelines(calls, mode).timelines.map((t) => timelineSample(t, (group.rewards[i] - mean) / (std + 1e-6))));
}

export default async function merge(ctx: BenchContext): Promise<Record<string, unknown>> {
  const scale = Number(argValue(ctx.args, '--scale') ?? DEFAULT_SCALE);
  const onlyTurns = argValue(ctx.args, '--turns');
  const driver = (argValue(ctx.args, '--driver') ?? 'gateway') as Driver;
  const groupSize = Number(argValue(ctx.args, '--group') ?? DEFAULT_GROUP_SIZE);
  const microBatchTokens = Number(argValue(ctx.args, '--micro-batch-tokens') ?? TRAIN.microBatchTokens);
  if (!Number.isInteger(microBatchTokens) || microBatchTokens < 64) throw new Error('--micro-batch-tokens must be an integer ≥ 64');
  TRAIN.microBatchTokens = microBatchTokens;
  if (!(scale > 0) || !['gateway', 'tracker'].includes(driver) || !Number.isInteger(groupSize) || groupSize < 2)
    throw new Error('usage: merge [--scale S>0] [--driver gateway|tracker] [--turns N] [--group N≥2]');
  const chosen = WORKLOADS.filter((w) => onlyTurns === undefined || w.turns === Number(onlyTurns));
  if (chosen.length === 0)
    throw new Error(`no workload has ${onlyTurns} turns (${WORKLOADS.map((w) => w.turns).join(', ')})`);
  const modelName = argValue(ctx.args, '--model') ?? 'narrow';
  const model = MODELS[modelName];
  if (!model) throw new Error(`--model: "${modelName}" is not a bench model (${Object.keys(MODELS).join(', ')})`);
  const config = model.config;
  const skipNaive = ctx.args.includes('--skip-naive');
  const workloads = chosen.map((w) => scaled(w, scale));
  const groupWorkloads = chosen.map((w) => scaled({ ...w, promptTokens: GROUP_PROMPT_TOKENS }, scale));
  const weights = initWeights(config, 1);

  // 1. Episodes: one per workload, then one group per workload.
  const episodes: MergeCall[][] = [];
  const groups: GroupRun[] = [];
  if (driver === 'gateway') {
    const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bench-merge-'));
    const peer = await PeerRuntime.start({
      dataDir,
      port: 0,
      consoleLogLevel: 'warn',
      // The builtin byte tokenizer and template, with the bench model's weights (in-process engine).
      models: [{ name: 'bench', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: groupSize }],
      startEngine: () => createEngineFromWeights({ name: 'bench', config, weights, tokenizer: null }),
      // The episodes are recorded, not trained on here: a step mid-run would change the weights under them.
      training: { autoStart: false },
    });
    try {
      for (const [i, w] of workloads.entries()) {
        ctx.log(`episode: ${w.turns} turns through the gateway …`);
        episodes.push((await gatewayEpisode(peer, w, i + 1)).calls);
      }
      for (const [i, w] of groupWorkloads.entries()) {
        ctx.log(`group: ${groupSize} episodes × ${w.turns} turns through the gateway, started together …`);
        groups.push(await gatewayGroup(peer, w, 10 + i, groupSize));
      }
    } finally {
      await peer.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  } else {
    for (const [i, w] of workloads.entries())
      episodes.push(toMergeCalls(runSyntheticEpisode(w, { seed: i + 1 }).calls));
    for (const [i, w] of groupWorkloads.entries()) groups.push(trackerGroup(w, 10 + i, groupSize));
  }

  // 2. One training step each way, on a fresh engine warmed up on a short sample.
  const engine = await createEngineFromWeights({
    name: 'bench-trainer',
    config,
    weights,
    tokenizer: null,
  });
  const warm = episodes[0][0];
  for (const packing of ['rows', 'tree'] as const)
    await engine.trainStep(
      mergeTimelines([warm], 'naive').timelines.map((t) => timelineSample(t, 1)),
      { ...TRAIN, packing },
    );
  // Each row goes to the progress log as it completes (a group's naive step and the check take minutes); the tables
  // print at the end.
  const logRow = (title: string, row: Row) => ctx.log(`${title}:\n${formatTable([row])}`);
  const rows: Row[] = [];
  for (const [i, calls] of episodes.entries()) {
    const merged = mergeTimelines(calls, 'merged');
    const naive = mergeTimelines(calls, 'naive');
    const samples = (result: typeof merged) => result.timelines.map((t) => timelineSample(t, 1));
    ctx.log(
      `update: ${workloads[i].turns} turns, naive ${merged.savings.naiveTokens} tokens vs merged ${merged.savings.mergedTokens} …`,
    );
    const naiveStep = skipNaive ? null : await timedStep(engine, samples(naive));
    const mergedStep = await timedStep(engine, samples(merged));
    rows.push({
      turns: workloads[i].turns,
      naive_tokens: merged.savings.naiveTokens,
      merged_tokens: merged.savings.mergedTokens,
      token_ratio: round(merged.savings.tokenRatio),
      naive_update_ms: naiveStep && Math.round(naiveStep.ms),
      merged_update_ms: Math.round(mergedStep.ms),
      update_time_ratio: naiveStep && round(naiveStep.ms / mergedStep.ms),
      merge_rate: merged.savings.mergeRate,
    });
    logRow('single episode', rows[rows.length - 1]);
  }

  const groupRows: Row[] = [];
  for (const group of groups) {
    const naive = groupSamples(group, 'naive');
    const merged = groupSamples(group, 'merged');
    const tokens = (samples: TrainSample[]) => samples.reduce((a, s) => a + s.tokens.length, 0);
    ctx.log(
      `update: group ${groupSize} × ${group.workload.turns} turns, naive ${tokens(naive)} tokens, merged ${tokens(merged)}, tree ${treeTokenCount(merged, TRAIN.microBatchTokens)} …`,
    );
    const naiveStep = skipNaive ? null : await timedStep(engine, naive);
    const mergedStep = await timedStep(engine, merged);
    const treeStep = await timedStep(engine, merged, 'tree');
    const tokenRatio = tokens(naive) / treeStep.computedTokens;
    groupRows.push({
      group: `${groupSize} × ${group.workload.turns} turns`,
      naive_tokens: tokens(naive),
      merged_tokens: tokens(merged),
      tree_tokens: treeStep.computedTokens,
      trunk_tokens: planTreeRuns(merged, TRAIN.microBatchTokens).reduce((a, r) => a + r.trunkLength, 0),
      tree_token_ratio: round(tokenRatio),
      naive_update_ms: naiveStep && Math.round(naiveStep.ms),
      merged_update_ms: Math.round(mergedStep.ms),
      tree_update_ms: Math.round(treeStep.ms),
      tree_update_time_ratio: naiveStep && round(naiveStep.ms / treeStep.ms),
      time_vs_token_ratio: naiveStep && round(naiveStep.ms / treeStep.ms / tokenRatio),
      tree_vs_merged: round(mergedStep.ms / treeStep.ms),
      tree_vs_merged_tokens: round(tokens(merged) / treeStep.computedTokens),
      group_prefix_cache_share: group.prefixCacheShare === null ? null : round(group.prefixCacheShare),
    });
    logRow('group', groupRows[groupRows.length - 1]);
  }
  await engine.close();

  // 3. Exactness in the same run: the smallest group's tree against one sample per call, each its own forward.
  let exactness: Row | null = null;
  if (groups.length > 0 && !skipNaive) {
    const group = groups[0];
    ctx.log(`check: group ${groupSize} × ${group.workload.turns} turns, tree vs one sample per call (loss and gradients) …`);
    const separate = await tokenSumLossAndGradients(config, weights, groupSamples(group, 'naive'));
    const tree = await engineLossAndGradients(config, weights, groupSamples(group, 'merged'), 'tree', TRAIN.microBatchTokens);
    // The loss error against Σ |per-sample loss|: advantages of both signs cancel in the total, a float32 sum's
    // rounding does not.
    const lossError = Math.abs(tree.loss - separate.loss) / Math.max(Math.abs(separate.loss), separate.lossMagnitude ?? 0);
    const gradientError = relativeGradientError(tree.gradients, separate.gradients);
    exactness = {
      group: `${groupSize} × ${group.workload.turns} turns`,
      loss_separate: separate.loss,
      loss_tree: tree.loss,
      loss_magnitude: separate.lossMagnitude ?? null,
      loss_error: lossError,
      gradient_rel_error: gradientError,
      within_1e4: lossError <= 1e-4 && gradientError <= 1e-4,
    };
    logRow('exactness', exactness);
  }

  const backend = engine.info.backend.name;
  process.stdout.write(
    `merge: ${driver === 'gateway' ? 'episodes through the real gateway + tracker' : 'episodes through the real tracker (no gateway)'}; backend ${backend}; scale ${scale}; model: ${model.label}\n`,
  );
  process.stdout.write('single episodes (naive: one sample per call; merged: timelines as padded rows)\n');
  process.stdout.write(formatTable(rows) + '\n\n');
  process.stdout.write(
    `GRPO groups (${groupSize} repeats of one task sharing a ${Math.round(GROUP_PROMPT_TOKENS * scale)}-token context; tree: the batch's merged timelines as one prefix tree per micro-batch of ${TRAIN.microBatchTokens} tokens, behind a trunk computed once where micro-batches share one)\n`,
  );
  process.stdout.write(formatTable(groupRows) + '\n\n');
  if (exactness) process.stdout.write('exactness (token-sum PPO loss; gradients of every parameter)\n' + formatTable([exactness]) + '\n');
  return { workloads: rows, groups: groupRows, exactness, backend, driver, scale, groupSize, microBatchTokens, groupPromptTokens: Math.round(GROUP_PROMPT_TOKENS * scale), model: model.label, skipNaive };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
