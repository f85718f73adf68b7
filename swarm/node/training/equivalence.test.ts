/**
 * The architecture's invariant (docs/ARCHITECTURE.md, "Invariant to test"): with a token-sum policy loss, the
 * merged timelines of an episode give the same loss and the same gradients as one sample per call, while
 * processing far fewer tokens. Episodes are multi-turn agent runs through the real tracker and merger; the model
 * is a tiny decoder (2 layers, width 64) run by the trainer's own model and loss code.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { DecoderConfig, TrainSample } from '../../../worker/common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import type { MergeMode } from '../../common/timeline/merge.ts';
import { buildTrainBatch, type EpisodeForTraining } from './advantages.ts';
import { engineLossAndGradients, relativeGradientError, tokenSumLossAndGradients, type LossAndGradients } from './testing/policy-gradient.ts';
import { runSyntheticEpisode, type AgentWorkload } from './testing/synthetic-agent.ts';

const TINY: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 264, // the byte tokenizer's vocabulary
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  intermediate_size: 192,
  max_position_embeddings: 2048,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: true,
  attention_bias: false,
};
const WORKLOAD: AgentWorkload = { turns: 3, promptTokens: 96, observationTokens: 32, actionTokens: 12 };
const REWARDS = [1, 0];
const TOLERANCE = 1e-4;

const weights = initWeights(TINY, 7);
let engine: LocalEngine;
let batches: Record<MergeMode, { samples: TrainSample[]; tokens: number }>;
let naive: LossAndGradients;

/** Deterministic noise in [-0.3, 0.3): old logprobs off the current policy, so some ratios leave the clip range. */
const noise = (call: number, token: number) => (((call * 31 + token * 17) % 61) / 61 - 0.5) * 0.6;

beforeAll(async () => {
  engine = await createEngineFromWeights({ name: 'tiny-equivalence', config: TINY, weights, tokenizer: null, backend: 'wasm' }); // one backend wherever the test runs: its tolerances are wasm's f32
  // Old logprobs as a sampler would record them: the policy's own logprobs of each generated token (plus noise).
  const episodes: Record<MergeMode, EpisodeForTraining[]> = { merged: [], naive: [] };
  for (const [i, reward] of REWARDS.entries()) {
    const draft = runSyntheticEpisode(WORKLOAD, { seed: i + 1 });
    const scored = await engine.logprobs(draft.calls.map((c) => [...c.promptIds, ...c.generatedIds]));
    const logprob = (call: number, token: number) => scored[call][draft.calls[call].promptIds.length + token] + noise(call, token);
    const tracker = runSyntheticEpisode(WORKLOAD, { seed: i + 1, logprob });
    for (const mode of ['merged', 'naive'] as const) {
      episodes[mode].push({ episodeId: tracker.episodeId, reward, timelines: tracker.merge(mode).timelines });
    }
  }
  batches = {
    merged: buildTrainBatch([{ groupId: 'task', episodes: episodes.merged }], 1e-6),
    naive: buildTrainBatch([{ groupId: 'task', episodes: episodes.naive }], 1e-6),
  };
  naive = await tokenSumLossAndGradients(TINY, weights, batches.naive.samples);
});

describe('merged timelines vs one sample per call (token-sum loss)', () => {
  it('merges each multi-call episode into one timeline that holds far fewer tokens', () => {
    expect(batches.merged.samples).toHaveLength(REWARDS.length);
    expect(batches.naive.samples).toHaveLength(REWARDS.length * WORKLOAD.turns);
    expect(batches.naive.tokens / batches.merged.tokens).toBeGreaterThan(2);
    const trained = (samples: TrainSample[]) => samples.reduce((s, x) => s + x.lossMask.reduce((a, m) => a + m, 0), 0);
    expect(trained(batches.merged.samples)).toBe(trained(batches.naive.samples));
  });

  it('gives the same loss and the same gradient for every parameter', async () => {
    const merged = await tokenSumLossAndGradients(TINY, weights, batches.merged.samples);
    // Not a vacuous match: a real loss, a real gradient.
    expect(Math.abs(naive.loss)).toBeGreaterThan(1e-3);
    expect(Object.values(naive.gradients).some((g) => g.some((x) => Math.abs(x) > 1e-6))).toBe(true);

    expect(Math.abs(merged.loss - naive.loss) / Math.abs(naive.loss)).toBeLessThanOrEqual(TOLERANCE);
    expect(relativeGradientError(merged.gradients, naive.gradients)).toBeLessThanOrEqual(TOLERANCE);
    for (const name of Object.keys(naive.gradients)) {
      expect(relativeGradientError({ [name]: merged.gradients[name] }, { [name]: naive.gradients[name] }), name).toBeLessThanOrEqual(TOLERANCE);
    }
  });

  it('changes the gradient when one generated token is masked out (the check can fail)', async () => {
    const tampered = batches.merged.samples.map((s) => ({ ...s, lossMask: [...s.lossMask] }));
    tampered[0].lossMask[tampered[0].lossMask.lastIndexOf(1)] = 0;
    const merged = await tokenSumLossAndGradients(TINY, weights, tampered);
    expect(relativeGradientError(merged.gradients, naive.gradients)).toBeGreaterThan(TOLERANCE);
  });

  it("agrees through the engine's own trainStep (micro-batched, padded) with the episode count as divisor", async () => {
    // learningRate 0: the step reports loss and gradient norm and leaves the weights as they are. The divisor is
    // what the training loop passes: the number of episodes, the same for both packings.
    const options = { loss: 'ppo', normalization: 'token-sum', clipLow: 0.2, clipHigh: 0.2, learningRate: 0, weightDecay: 0, microBatchTokens: 512, lossDivisor: REWARDS.length, packing: 'rows' } as const;
    const naive = await engine.trainStep(batches.naive.samples, options);
    const merged = await engine.trainStep(batches.merged.samples, options);
    expect(Math.abs(naive.loss)).toBeGreaterThan(1e-3);
    expect(Math.abs(merged.loss - naive.loss) / Math.abs(naive.loss)).toBeLessThanOrEqual(TOLERANCE);
    expect(Math.abs(merged.gradNorm - naive.gradNorm) / naive.gradNorm).toBeLessThanOrEqual(TOLERANCE);
    expect(merged.tokens).toBeLessThan(naive.tokens);
    expect(merged.trainedTokens).toBe(naive.trainedTokens);

    // The same check can fail: one generated token masked out changes the engine's loss and gradient.
    const tampered = batches.merged.samples.map((s) => ({ ...s, lossMask: [...s.lossMask] }));
    tampered[0].lossMask[tampered[0].lossMask.lastIndexOf(1)] = 0;
    const off = await engine.trainStep(tampered, options);
    expect(Math.abs(off.gradNorm - naive.gradNorm) / naive.gradNorm).toBeGreaterThan(TOLERANCE);
  });

  it('refuses a loss divisor that is not a positive number', async () => {
    const options = { normalization: 'token-sum', learningRate: 0, lossDivisor: 0 } as const;
    await expect(engine.trainStep(batches.merged.samples, options)).rejects.toMatchObject({ name: 'InvalidTrainOptionsError' });
  });
});

describe("a GRPO group's timelines as one prefix tree (token-sum loss)", () => {
  // Four repeats of one task: the same system prompt and task, then their own actions and observations.
  const GROUP_REWARDS = [1, 0, 0.5, 0];
  let group: Record<MergeMode, TrainSample[]>;
  let separate: LossAndGradients;

  beforeAll(async () => {
    const episodes: Record<MergeMode, EpisodeForTraining[]> = { merged: [], naive: [] };
    for (const [i, reward] of GROUP_REWARDS.entries()) {
      const draft = runSyntheticEpisode(WORKLOAD, { seed: 10 + i, taskSeed: 3 });
      const scored = await engine.logprobs(draft.calls.map((c) => [...c.promptIds, ...c.generatedIds]));
      const logprob = (call: number, token: number) => scored[call][draft.calls[call].promptIds.length + token] + noise(call, token);
      const tracker = runSyntheticEpisode(WORKLOAD, { seed: 10 + i, taskSeed: 3, logprob });
      for (const mode of ['merged', 'naive'] as const) episodes[mode].push({ episodeId: `${tracker.episodeId}-${i}`, reward, timelines: tracker.merge(mode).timelines });
    }
    group = {
      merged: buildTrainBatch([{ groupId: 'task-3', episodes: episodes.merged }], 1e-6).samples,
      naive: buildTrainBatch([{ groupId: 'task-3', episodes: episodes.naive }], 1e-6).samples,
    };
    // The reference: every per-call sample through its own forward.
    separate = await tokenSumLossAndGradients(TINY, weights, group.naive);
  });

  it('gives the loss and gradients of one sample per call, from the merged timelines and from the calls themselves', async () => {
    expect(Math.abs(separate.loss)).toBeGreaterThan(1e-3);
    for (const [samples, budget] of [
      [group.merged, 4096],
      [group.naive, 4096],
      [group.merged, 300], // split into several micro-batches at subtree boundaries
    ] as const) {
      const tree = await engineLossAndGradients(TINY, weights, samples, 'tree', budget);
      expect(Math.abs(tree.loss - separate.loss) / Math.abs(separate.loss)).toBeLessThanOrEqual(TOLERANCE);
      expect(relativeGradientError(tree.gradients, separate.gradients)).toBeLessThanOrEqual(TOLERANCE);
    }
  });

  it("computes the group's shared context once: fewer tokens than the merged timelines as rows", async () => {
    const rows = await engineLossAndGradients(TINY, weights, group.merged, 'rows');
    const tree = await engineLossAndGradients(TINY, weights, group.merged, 'tree');
    const mergedTokens = group.merged.reduce((a, s) => a + s.tokens.length, 0);
    expect(rows.computedTokens).toBeGreaterThanOrEqual(mergedTokens);
    // Each repeat after the first shares at least the system prompt and task.
    expect(tree.computedTokens).toBeLessThanOrEqual(mergedTokens - (GROUP_REWARDS.length - 1) * (WORKLOAD.promptTokens - 10));
    expect(relativeGradientError(tree.gradients, rows.gradients)).toBeLessThanOrEqual(TOLERANCE);
  });
});
