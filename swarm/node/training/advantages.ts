/**
 * GRPO advantages and the training samples built from them.
 *
 * An episode's advantage is its reward standardised within its group: (reward − group mean) ÷ (group std + ε),
 * with the population std (the group is the whole population of repeats of its task). The advantage is
 * broadcast over every generated token (loss mask 1) of each of the episode's timelines; prompt tokens get 0.
 * Pure: numbers in, TrainSample[] out (the engine's sample convention, worker/common/engine.ts).
 */
import type { TrainSample } from '../../../worker/common/engine.ts';
import { EpisodeSamplesError } from './errors.ts';

/** The parts of a merged timeline (swarm/common/timeline) a sample needs. */
export interface SampleTimeline {
  tokens: readonly number[];
  lossMask: readonly number[];
  /** Old logprobs at generated positions, 0 elsewhere. */
  logprobs: readonly number[];
}

export interface EpisodeForTraining {
  episodeId: string;
  reward: number;
  timelines: readonly SampleTimeline[];
}

export interface GroupForTraining {
  groupId: string;
  episodes: readonly EpisodeForTraining[];
}

export interface TrainBatch {
  samples: TrainSample[];
  /** One per episode, in group order (the training loop divides the token-sum loss by their count). */
  advantages: { episodeId: string; groupId: string; reward: number; advantage: number }[];
  /** Tokens across all samples, and how many of them the loss trains on. */
  tokens: number;
  trainedTokens: number;
}

export function groupAdvantages(rewards: readonly number[], epsilon: number): number[] {
  if (rewards.length === 0) return [];
  const mean = rewards.reduce((s, r) => s + r, 0) / rewards.length;
  const variance = rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / rewards.length;
  const std = Math.sqrt(variance);
  return rewards.map((r) => (r - mean) / (std + epsilon));
}

/** One timeline as a training sample carrying `advantage` on its generated tokens. */
export function timelineSample(timeline: SampleTimeline, advantage: number, episodeId = ''): TrainSample {
  const n = timeline.tokens.length;
  if (timeline.lossMask.length !== n || timeline.logprobs.length !== n) {
    throw new EpisodeSamplesError(
      `timeline arrays differ in length (tokens ${n}, lossMask ${timeline.lossMask.length}, logprobs ${timeline.logprobs.length})`,
      episodeId,
    );
  }
  // Position 0 has nothing before it to be predicted from: the engine requires mask 0 there.
  const lossMask = timeline.lossMask.map((m, t) => (t === 0 ? 0 : m));
  return {
    tokens: [...timeline.tokens],
    lossMask,
    advantages: lossMask.map((m) => (m === 1 ? advantage : 0)),
    oldLogprobs: timeline.logprobs.map((lp, t) => (lossMask[t] === 1 ? lp : 0)),
  };
}

export function buildTrainBatch(groups: readonly GroupForTraining[], epsilon: number): TrainBatch {
  const batch: TrainBatch = { samples: [], advantages: [], tokens: 0, trainedTokens: 0 };
  for (const group of groups) {
    const advantages = groupAdvantages(
      group.episodes.map((e) => e.reward),
      epsilon,
    );
    group.episodes.forEach((episode, i) => {
      if (episode.timelines.length === 0) throw new EpisodeSamplesError(`episode ${episode.episodeId} has no recorded calls`, episode.episodeId);
      batch.advantages.push({ episodeId: episode.episodeId, groupId: group.groupId, reward: episode.reward, advantage: advantages[i] });
      for (const timeline of episode.timelines) {
        const sample = timelineSample(timeline, advantages[i], episode.episodeId);
        batch.samples.push(sample);
        batch.tokens += sample.tokens.length;
        batch.trainedTokens += sample.lossMask.reduce((s, m) => s + m, 0);
      }
    });
  }
  return batch;
}
