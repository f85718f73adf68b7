import { describe, expect, it } from 'vitest';
import { buildTrainBatch, groupAdvantages, timelineSample } from './advantages.ts';

describe('groupAdvantages', () => {
  it('standardises rewards within the group (population std)', () => {
    // mean 0.5, std 0.5
    expect(groupAdvantages([1, 0, 1, 0], 0)).toEqual([1, -1, 1, -1]);
    const adv = groupAdvantages([3, 1, 2], 1e-6);
    const std = Math.sqrt(2 / 3);
    expect(adv[0]).toBeCloseTo(1 / (std + 1e-6), 10);
    expect(adv[1]).toBeCloseTo(-1 / (std + 1e-6), 10);
    expect(adv[2]).toBeCloseTo(0, 12);
  });

  it('gives zero advantage to a uniform group instead of dividing by zero', () => {
    expect(groupAdvantages([2, 2, 2], 1e-6)).toEqual([0, 0, 0]);
  });
});

describe('timelineSample', () => {
  it('broadcasts the advantage over generated tokens only and keeps their old logprobs', () => {
    const sample = timelineSample({ tokens: [5, 6, 7, 8, 9], lossMask: [0, 1, 1, 0, 1], logprobs: [0, -0.1, -0.2, 0, -0.3] }, 0.5);
    expect(sample).toEqual({
      tokens: [5, 6, 7, 8, 9],
      lossMask: [0, 1, 1, 0, 1],
      advantages: [0, 0.5, 0.5, 0, 0.5],
      oldLogprobs: [0, -0.1, -0.2, 0, -0.3],
    });
  });

  it('never trains position 0 (nothing precedes it)', () => {
    const sample = timelineSample({ tokens: [5, 6], lossMask: [1, 1], logprobs: [-1, -2] }, 1);
    expect(sample.lossMask).toEqual([0, 1]);
    expect(sample.advantages).toEqual([0, 1]);
  });

  it('rejects a timeline whose arrays differ in length', () => {
    expect(() => timelineSample({ tokens: [1, 2], lossMask: [0], logprobs: [0, 0] }, 1)).toThrow(expect.objectContaining({ name: 'EpisodeSamplesError' }));
  });
});

describe('buildTrainBatch', () => {
  it('gives every timeline of an episode the episode advantage and counts tokens', () => {
    const t = (n: number) => ({ tokens: Array.from({ length: n }, (_, i) => i + 1), lossMask: Array.from({ length: n }, (_, i) => i % 2), logprobs: Array(n).fill(-0.5) });
    const batch = buildTrainBatch(
      [
        { groupId: 'g', episodes: [{ episodeId: 'win', reward: 1, timelines: [t(4), t(6)] }, { episodeId: 'lose', reward: 0, timelines: [t(4)] }] },
      ],
      0,
    );
    expect(batch.advantages).toEqual([
      { episodeId: 'win', groupId: 'g', reward: 1, advantage: 1 },
      { episodeId: 'lose', groupId: 'g', reward: 0, advantage: -1 },
    ]);
    expect(batch.samples.map((s) => Math.max(...s.advantages) + Math.min(...s.advantages))).toEqual([1, 1, -1]);
    expect(batch.tokens).toBe(14);
    expect(batch.trainedTokens).toBe(2 + 3 + 2);
  });

  it('refuses an episode without calls', () => {
    expect(() => buildTrainBatch([{ groupId: 'g', episodes: [{ episodeId: 'x', reward: 1, timelines: [] }] }], 0)).toThrow(expect.objectContaining({ name: 'EpisodeSamplesError' }));
  });
});
