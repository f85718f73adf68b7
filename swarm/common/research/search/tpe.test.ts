// TPE: beats random search on a 1-D objective, stays inside the range, respects parallelArms, is pure and ends.
import { describe, expect, it } from 'vitest';
import type { Params, SearchSpec, SearchStrategy, TrialOutcome } from './types.ts';
import { createStrategy } from './index.ts';
import { bandwidth, splitGoodBad } from './tpe.ts';

const LR_MIN = 1e-5;
const LR_MAX = 1e-1;
const space = { 'train.learningRate': { min: LR_MIN, max: LR_MAX, log: true } };
/** Peaks at lr = 1e-3, in log10 space. */
const objective = (params: Params) => -((Math.log10(params['train.learningRate'] as number) + 3) ** 2);
const TRIALS = 30;

/** Propose → run → finish the oldest running arm, until the strategy is done; returns the trials. */
function simulate(strategy: SearchStrategy, parallelArms: number): TrialOutcome[] {
  const trials: TrialOutcome[] = [];
  for (let call = 0; call < 10 * TRIALS; call++) {
    const { arms, done } = strategy.next(trials);
    if (done) return trials;
    for (const a of arms) trials.push({ arm: a.arm, params: a.params, seed: 0, steps: a.steps, state: 'running', metric: null });
    expect(trials.filter((t) => t.state === 'running').length).toBeLessThanOrEqual(parallelArms);
    const oldest = trials.find((t) => t.state === 'running');
    if (oldest) Object.assign(oldest, { state: 'done', metric: objective(oldest.params) });
  }
  throw new Error('never done');
}

const ctx = (seed: number, parallelArms = 1) => ({ steps: 100, seeds: 1, seed, parallelArms });
const tpeSpec: SearchSpec = { strategy: 'tpe', space, trials: TRIALS, startupTrials: 8, gamma: 0.25, candidates: 24 };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('tpe', () => {
  it('finds a better optimum than random search over the same number of arms', () => {
    const seeds = [1, 2, 3, 4, 5, 6, 7];
    const tpeBests = seeds.map((seed) => createStrategy(tpeSpec, ctx(seed)).best(simulate(createStrategy(tpeSpec, ctx(seed)), 1))?.metric ?? -Infinity);
    const randomSpec: SearchSpec = { strategy: 'random', space, trials: TRIALS };
    const randomBests = seeds.map((seed) => createStrategy(randomSpec, ctx(seed)).best(simulate(createStrategy(randomSpec, ctx(seed)), TRIALS))?.metric ?? -Infinity);
    expect(median(tpeBests)).toBeGreaterThan(median(randomBests));
    // Most seeds individually beat random's median, not just the median seed.
    expect(tpeBests.filter((m) => m > median(randomBests)).length).toBeGreaterThanOrEqual(5);
  });

  it('never proposes outside the range, keeps to parallelArms and trials, and ends', () => {
    const trials = simulate(createStrategy(tpeSpec, ctx(9, 3)), 3);
    const lrs = trials.map((t) => t.params['train.learningRate'] as number);
    expect(lrs).toHaveLength(TRIALS);
    expect(new Set(trials.map((t) => t.arm)).size).toBe(TRIALS);
    for (const lr of lrs) expect(lr >= LR_MIN && lr <= LR_MAX).toBe(true);
  });

  it('is pure: the same trials give the same proposals, and pending ones are not repeated', () => {
    const strategy = createStrategy(tpeSpec, ctx(4, 2));
    const trials = simulate(createStrategy(tpeSpec, ctx(4, 2)), 2).slice(0, 12);
    for (const t of trials.slice(10)) Object.assign(t, { state: 'pending', metric: null });
    const first = strategy.next(trials);
    expect(createStrategy(tpeSpec, ctx(4, 2)).next(trials)).toEqual(first);
    expect(first.arms).toHaveLength(0); // two pending already fill parallelArms
    Object.assign(trials[11], { state: 'done', metric: -1 });
    const one = strategy.next(trials);
    expect(one.arms).toHaveLength(1);
    expect(trials.map((t) => t.arm)).not.toContain(one.arms[0].arm);
  });

  it('handles lists and integer knobs, never leaving the space', () => {
    const spec: SearchSpec = { strategy: 'tpe', space: { opt: { values: ['adam', 'sgd', 'lion'] }, g: { min: 2, max: 6, integer: true } }, trials: 12, startupTrials: 3, gamma: 0.3, candidates: 10 };
    const trials = simulate(createStrategy(spec, ctx(2, 2)), 2);
    for (const t of trials) {
      expect(['adam', 'sgd', 'lion']).toContain(t.params.opt);
      expect(Number.isInteger(t.params.g) && (t.params.g as number) >= 2 && (t.params.g as number) <= 6).toBe(true);
    }
  });

  it('splits good from bad leaving both non-empty, and clamps the bandwidth', () => {
    expect(splitGoodBad([1, 2, 3, 4, 5, 6, 7, 8], 0.25)).toEqual({ good: [1, 2], bad: [3, 4, 5, 6, 7, 8] });
    expect(splitGoodBad([1, 2], 0.9)).toEqual({ good: [1], bad: [2] });
    expect(bandwidth([], 10)).toBe(10);
    expect(bandwidth([5], 10)).toBe(5);
    expect(bandwidth([5, 5, 5], 10)).toBe(2.5);
  });
});
