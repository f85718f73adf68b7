// Random search: seeded, inside the space, distinct arms, proposed once.
import { describe, expect, it } from 'vitest';
import type { SearchSpace } from './types.ts';
import { createStrategy } from './index.ts';

const space: SearchSpace = { lr: { min: 1e-5, max: 1e-1, log: true }, groupSize: { min: 2, max: 16, integer: true }, opt: { values: ['adam', 'sgd'] } };
const proposals = (seed: number) => createStrategy({ strategy: 'random', space, trials: 12 }, { steps: 5, seeds: 1, seed, parallelArms: 1 }).next([]).arms;

describe('random', () => {
  it('is deterministic for a seed and different for another', () => {
    expect(proposals(3)).toEqual(proposals(3));
    expect(proposals(3).map((a) => a.arm)).not.toEqual(proposals(4).map((a) => a.arm));
  });
  it('samples trials distinct arms inside the ranges, integers integral', () => {
    const arms = proposals(9);
    expect(arms).toHaveLength(12);
    expect(new Set(arms.map((a) => a.arm)).size).toBe(12);
    for (const { params } of arms) {
      expect(params.lr as number).toBeGreaterThanOrEqual(1e-5);
      expect(params.lr as number).toBeLessThanOrEqual(1e-1);
      expect(Number.isInteger(params.groupSize)).toBe(true);
      expect(params.groupSize as number).toBeGreaterThanOrEqual(2);
      expect(params.groupSize as number).toBeLessThanOrEqual(16);
    }
  });
  it('spreads log-uniformly: about half the draws below the geometric middle', () => {
    const arms = createStrategy({ strategy: 'random', space: { lr: { min: 1e-5, max: 1e-1, log: true } }, trials: 400 }, { steps: 5, seeds: 1, seed: 2, parallelArms: 1 }).next([]).arms;
    const below = arms.filter((a) => (a.params.lr as number) < 1e-3).length;
    expect(below).toBeGreaterThan(160);
    expect(below).toBeLessThan(240);
  });
  it('yields fewer arms when a small list space runs out of distinct points', () => {
    const arms = createStrategy({ strategy: 'random', space: { opt: { values: ['a', 'b'] } }, trials: 5 }, { steps: 5, seeds: 1, seed: 2, parallelArms: 1 }).next([]).arms;
    expect(arms.map((a) => a.arm).sort()).toEqual(['opt=a', 'opt=b']);
  });
});
