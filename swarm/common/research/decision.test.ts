// Tests for pre-registered decision criteria: each outcome on data whose answer is clear by eye, a negative control
// (arms drawn alike must not come out 'met'), and the cases where no decision can be made.
import { describe, expect, it } from 'vitest';
import { decide, describeCriterion, type DecisionCriterion } from './decision.ts';
import { seededRandom, welchTest } from './stats.ts';

/** Normal draws from a seeded PRNG (Box–Muller), so the control arms are reproducible. */
function normalSample(random: () => number, n: number, mu: number, sigma: number): number[] {
  return Array.from({ length: n }, () => mu + sigma * Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random()));
}

const welchCriterion: DecisionCriterion = { kind: 'difference', better: 'with-kl', than: 'no-kl', minDifference: 0.05, confidence: 0.95, test: 'welch' };
const permutationCriterion: DecisionCriterion = { ...welchCriterion, test: 'permutation' };

const clearWin = { 'with-kl': [0.71, 0.72, 0.7, 0.73, 0.715], 'no-kl': [0.6, 0.61, 0.59, 0.605, 0.6] };
const noDifference = { 'with-kl': [0.6, 0.601, 0.599, 0.6005, 0.5995], 'no-kl': [0.6, 0.6, 0.6005, 0.5995, 0.6] };
const noisy = { 'with-kl': [0.5, 0.9, 0.6, 0.8, 0.75], 'no-kl': [0.55, 0.7, 0.5, 0.65, 0.6] };

describe('describeCriterion', () => {
  it('says the criterion in words', () => {
    expect(describeCriterion(welchCriterion)).toBe(
      "with-kl's metric exceeds no-kl's by ≥ 0.05, and the 95% CI of the difference excludes 0 (Welch's t)",
    );
    expect(describeCriterion(permutationCriterion)).toContain('permutation test');
    expect(describeCriterion({ kind: 'threshold', arm: 'best', atLeast: 0.8, confidence: 0.9 })).toBe(
      "the best arm's metric is at least 0.8: the lower end of its 90% CI (Student's t) is ≥ 0.8",
    );
  });
});

describe('decide: difference', () => {
  it('is met on a clear, large win, with the Welch numbers in the statement', () => {
    const result = decide(welchCriterion, clearWin);
    const welch = welchTest(clearWin['no-kl'], clearWin['with-kl']);
    expect(result.outcome).toBe('met');
    expect(result.estimate).toBeCloseTo(0.715 - 0.601, 12);
    expect(result.low).toBeCloseTo(welch.low!, 12);
    expect(result.high).toBeCloseTo(welch.high!, 12);
    expect(result.p).toBeCloseTo(welch.p!, 12);
    expect(result.effectSize!).toBeGreaterThan(5);
    expect(result.n).toEqual({ 'with-kl': 5, 'no-kl': 5 });
    expect(result.statement).toContain('with-kl − no-kl = 0.114');
    expect(result.statement).toContain(`CI ${Number(welch.low!.toPrecision(3))} to ${Number(welch.high!.toPrecision(3))}`);
    expect(result.statement).toMatch(/: met, because/);
  });

  it('is met with the permutation test too, using its exact p', () => {
    const result = decide(permutationCriterion, clearWin);
    expect(result.outcome).toBe('met');
    // Every with-kl run beats every no-kl run: only 2 of the C(10, 5) = 252 splits are as extreme.
    expect(result.p).toBeCloseTo(2 / 252, 12);
    expect(result.low!).toBeGreaterThan(0);
    expect(result.statement).toContain('p = 0.00794');
  });

  it('with the permutation test, is met only when the exact p confirms the bootstrap CI', () => {
    // Three runs per arm, fully separated: the bootstrap CI excludes 0, but the smallest possible p is 2/20 = 0.1.
    const result = decide(permutationCriterion, { 'with-kl': [0.8, 0.81, 0.82], 'no-kl': [0.6, 0.61, 0.62] });
    expect(result.low!).toBeGreaterThan(0);
    expect(result.p).toBeCloseTo(0.1, 12);
    expect(result.outcome).toBe('inconclusive');
    expect(result.statement).toContain('exact permutation p (0.1) is not below 0.05');
    expect(decide({ ...permutationCriterion, confidence: 0.8 }, { 'with-kl': [0.8, 0.81, 0.82], 'no-kl': [0.6, 0.61, 0.62] }).outcome).toBe('met');
  });

  it('is not met when the CI rules out the required difference', () => {
    const result = decide(welchCriterion, noDifference);
    expect(result.outcome).toBe('not-met');
    expect(result.high!).toBeLessThan(0.05);
    expect(result.statement).toMatch(/not met, because the CI's upper end .* rules out a difference of 0.05/);
  });

  it('is not met when the CI lies below 0, whatever the required difference', () => {
    const result = decide({ ...welchCriterion, better: 'no-kl', than: 'with-kl', minDifference: -1 }, clearWin);
    expect(result.outcome).toBe('not-met');
    expect(result.high!).toBeLessThanOrEqual(0);
  });

  it('is inconclusive when the CI neither excludes 0 nor rules out the difference', () => {
    const result = decide(welchCriterion, noisy);
    expect(result.outcome).toBe('inconclusive');
    expect(result.low!).toBeLessThan(0);
    expect(result.high!).toBeGreaterThan(0.05);
    expect(result.statement).toContain('the CI includes 0');
    expect(decide(permutationCriterion, noisy).outcome).toBe('inconclusive');
  });

  it('is inconclusive when the CI excludes 0 but the estimate falls short of the required difference', () => {
    const result = decide({ ...welchCriterion, minDifference: 0.12 }, clearWin);
    expect(result.estimate!).toBeLessThan(0.12);
    expect(result.low!).toBeGreaterThan(0);
    expect(result.high!).toBeGreaterThanOrEqual(0.12);
    expect(result.outcome).toBe('inconclusive');
  });

  it('negative control: arms drawn alike are (almost) never met', () => {
    const random = seededRandom(7);
    const trials = 200;
    for (const criterion of [welchCriterion, permutationCriterion]) {
      let metRequired = 0;
      let metAtZero = 0;
      for (let i = 0; i < trials; i++) {
        const metrics = { 'with-kl': normalSample(random, 5, 0.6, 0.05), 'no-kl': normalSample(random, 5, 0.6, 0.05) };
        if (decide(criterion, metrics).outcome === 'met') metRequired++;
        if (decide({ ...criterion, minDifference: 0 }, metrics).outcome === 'met') metAtZero++;
      }
      // With minDifference 0, 'met' is a one-sided 2.5% test: its false-positive rate must stay near that.
      expect(metAtZero / trials).toBeLessThan(0.06);
      expect(metRequired / trials).toBeLessThanOrEqual(metAtZero / trials);
    }
  });

  it('is inconclusive, saying so, with fewer than 2 runs in an arm', () => {
    const result = decide(welchCriterion, { 'with-kl': [0.9], 'no-kl': [0.1, 0.2, 0.15] });
    expect(result.outcome).toBe('inconclusive');
    expect(result.statement).toContain('too few runs');
    expect(result.statement).toContain('"with-kl" has 1');
    expect(result.n).toEqual({ 'with-kl': 1, 'no-kl': 3 });
    expect(result.low).toBeNull();
  });

  it('is inconclusive, naming it, when an arm is missing', () => {
    const result = decide(welchCriterion, { 'with-kl': [0.9, 0.8] });
    expect(result.outcome).toBe('inconclusive');
    expect(result.statement).toContain('"no-kl"');
    expect(result.n).toEqual({ 'with-kl': 2, 'no-kl': 0 });
  });

  it('rejects a confidence outside (0, 1)', () => {
    expect(() => decide({ ...welchCriterion, confidence: 95 }, clearWin)).toThrow(RangeError);
  });
});

describe('decide: threshold', () => {
  const arms = { tight: [0.85, 0.86, 0.84, 0.85, 0.855], low: [0.5, 0.52, 0.49, 0.51], wide: [0.6, 0.95, 0.7, 0.9] };

  it('is met when the CI lies at or above the threshold', () => {
    const result = decide({ kind: 'threshold', arm: 'tight', atLeast: 0.8, confidence: 0.95 }, arms);
    expect(result.outcome).toBe('met');
    expect(result.estimate).toBeCloseTo(0.851, 12);
    // t(0.975, 4) = 2.7764 times s/√5.
    const sd = Math.sqrt([0.85, 0.86, 0.84, 0.85, 0.855].reduce((s, x) => s + (x - 0.851) ** 2, 0) / 4);
    expect(result.low).toBeCloseTo(0.851 - 2.7764451051977 * (sd / Math.sqrt(5)), 10);
    expect(result.p).toBeNull();
    expect(result.statement).toContain('Mean of tight = 0.851');
  });

  it('is not met when the CI lies below the threshold', () => {
    expect(decide({ kind: 'threshold', arm: 'low', atLeast: 0.8, confidence: 0.95 }, arms).outcome).toBe('not-met');
  });

  it('is inconclusive when the CI straddles the threshold', () => {
    const result = decide({ kind: 'threshold', arm: 'wide', atLeast: 0.8, confidence: 0.95 }, arms);
    expect(result.outcome).toBe('inconclusive');
    expect(result.statement).toContain('straddles 0.8');
  });

  it("names the resolved arm for 'best'", () => {
    const result = decide({ kind: 'threshold', arm: 'best', atLeast: 0.8, confidence: 0.95 }, arms, 'tight');
    expect(result.outcome).toBe('met');
    expect(result.statement).toContain('tight (the best arm)');
    expect(result.n).toEqual({ tight: 5 });
  });

  it("is inconclusive when 'best' is not resolved, the arm is missing, or has one run", () => {
    expect(decide({ kind: 'threshold', arm: 'best', atLeast: 0.8, confidence: 0.95 }, arms).outcome).toBe('inconclusive');
    const missing = decide({ kind: 'threshold', arm: 'gone', atLeast: 0.8, confidence: 0.95 }, arms);
    expect(missing.outcome).toBe('inconclusive');
    expect(missing.statement).toContain('"gone"');
    const single = decide({ kind: 'threshold', arm: 'one', atLeast: 0.8, confidence: 0.95 }, { one: [0.99] });
    expect(single.outcome).toBe('inconclusive');
    expect(single.statement).toContain('too few runs');
  });
});
