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
import { relativeGradientError, tokenSumLossAndGradients, type LossAndGradients } from './testing/policy-gradient.ts';
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
    const options = { loss: 'ppo', normalization: 'token-sum', clipLow: 0.2, clipHigh: 0.2, learningRate: 0, weightDecay: 0, microBatchTokens: 512, lossDivisor: REWARDS.length } as const;
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
