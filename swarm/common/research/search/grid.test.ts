// Grid search: the product's size and values, unique names, proposing once, done and best.
import { describe, expect, it } from 'vitest';
import type { ArmProposal, TrialOutcome } from './types.ts';
import { createStrategy } from './index.ts';
import { gridArms } from './grid.ts';

const ctx = { steps: 10, seeds: 2, seed: 1, parallelArms: 2 };

function pending(proposals: readonly ArmProposal[], seeds: number): TrialOutcome[] {
  return proposals.flatMap((p) => Array.from({ length: seeds }, (_, seed) => ({ arm: p.arm, params: p.params, seed, steps: p.steps, state: 'pending' as const, metric: null })));
}

describe('grid', () => {
  it('has pointsPerRange points per range, log-spaced, times each list', () => {
    const arms = gridArms({ 'train.learningRate': { min: 1e-4, max: 1e-2, log: true }, optimizer: { values: ['adam', 'sgd'] } });
    expect(arms).toHaveLength(6);
    expect([...new Set(arms.map((a) => a.params['train.learningRate']))]).toEqual([1e-4, 1e-3, 1e-2]);
    expect(arms[0].arm).toBe('learningRate=1e-4,optimizer=adam');
    expect(new Set(arms.map((a) => a.arm)).size).toBe(arms.length);
    expect(gridArms({ a: { min: 0, max: 1 }, b: { min: 0, max: 1 } }, 4)).toHaveLength(16);
  });

  it('proposes every arm once at full steps, is done when all finished, and picks the best', () => {
    const strategy = createStrategy({ strategy: 'grid', space: { x: { values: [1, 2, 3] } } }, ctx);
    const first = strategy.next([]);
    expect(first.arms.map((a) => a.arm)).toEqual(['x=1', 'x=2', 'x=3']);
    expect(first.arms.every((a) => a.steps === 10)).toBe(true);
    expect(strategy.next([])).toEqual(first); // pure
    const trials = pending(first.arms, 2);
    expect(strategy.next(trials)).toEqual({ arms: [], done: false });
    expect(strategy.best(trials)).toBeNull();
    for (const t of trials) Object.assign(t, { state: 'done', metric: (t.params.x as number) === 2 ? 5 + t.seed : 1 });
    expect(strategy.next(trials)).toEqual({ arms: [], done: true });
    expect(strategy.best(trials)).toEqual({ arm: 'x=2', params: { x: 2 }, metric: 5.5 });
  });
});
