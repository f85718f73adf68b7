// createStrategy: checks its inputs, and every strategy is a pure function of the trials (resume-safe).
import { describe, expect, it } from 'vitest';
import type { SearchSpec, TrialOutcome } from './types.ts';
import { createStrategy } from './index.ts';

const space = { lr: { min: 1e-4, max: 1e-2, log: true }, opt: { values: ['adam', 'sgd'] } };
const ctx = { steps: 8, seeds: 2, seed: 3, parallelArms: 2 };
const specs: SearchSpec[] = [
  { strategy: 'grid', space },
  { strategy: 'random', space, trials: 4 },
  { strategy: 'successive-halving', space, trials: 4, eta: 2, minSteps: 2, asynchronous: false },
  { strategy: 'successive-halving', space, trials: 4, eta: 2, minSteps: 2, asynchronous: true },
  { strategy: 'tpe', space, trials: 4, startupTrials: 2, gamma: 0.25, candidates: 8 },
];

describe('createStrategy', () => {
  it.each(specs.map((spec) => [`${spec.strategy}${'asynchronous' in spec && spec.asynchronous ? ' (ASHA)' : ''}`, spec] as const))(
    '%s proposes the same arms twice for the same trials, and not again once they are pending',
    (_label, spec) => {
      const first = createStrategy(spec, ctx).next([]);
      expect(first.arms.length).toBeGreaterThan(0);
      expect(createStrategy(spec, ctx).next([])).toEqual(first);
      const trials: TrialOutcome[] = first.arms.flatMap((a) => [0, 1].map((seed) => ({ arm: a.arm, params: a.params, seed, steps: a.steps, state: 'pending' as const, metric: null })));
      const again = createStrategy(spec, ctx).next(trials);
      const before = new Set(first.arms.map((a) => `${a.arm}@${a.steps}`));
      for (const a of again.arms) expect(before.has(`${a.arm}@${a.steps}`)).toBe(false);
      expect(again.done).toBe(false);
    },
  );

  it('rejects bad specs and contexts', () => {
    expect(() => createStrategy({ strategy: 'random', space, trials: 0 }, ctx)).toThrow(/trials/);
    expect(() => createStrategy({ strategy: 'successive-halving', space, trials: 4, eta: 1, minSteps: 2, asynchronous: false }, ctx)).toThrow(/eta/);
    expect(() => createStrategy({ strategy: 'tpe', space, trials: 4, startupTrials: 2, gamma: 1.5, candidates: 8 }, ctx)).toThrow(/gamma/);
    expect(() => createStrategy({ strategy: 'grid', space }, { ...ctx, seeds: 0 })).toThrow(/seeds/);
    expect(() => createStrategy({ strategy: 'grid', space: { lr: { min: 0, max: 1, log: true } } }, ctx)).toThrow(/log/);
  });
});
