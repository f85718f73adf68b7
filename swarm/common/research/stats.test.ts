// Tests for the research statistics: numbers are checked against published tables and closed forms, not against
// this module's own output.
import { describe, expect, it } from 'vitest';
import {
  areaUnderCurve,
  bootstrapDifferenceInterval,
  bootstrapInterval,
  curveBand,
  hedgesG,
  mean,
  normalQuantile,
  permutationTest,
  sampleSd,
  sampleVariance,
  seededRandom,
  studentTCdf,
  studentTQuantile,
  tInterval,
  welchTest,
} from './stats.ts';

// Wikipedia, "Welch's t-test", examples: two samples of 15.
const A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4];
const A2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4];

describe('descriptive statistics', () => {
  it('computes mean, n−1 variance and sd', () => {
    const xs = [2, 4, 4, 4, 5, 5, 7, 9];
    expect(mean(xs)).toBe(5);
    expect(sampleVariance(xs)).toBeCloseTo(32 / 7, 12);
    expect(sampleSd(xs)).toBeCloseTo(Math.sqrt(32 / 7), 12);
  });
});

describe('studentTQuantile', () => {
  // Published critical values (R's qt / SciPy's t.ppf to 12+ digits; the usual tables round them to 4 decimals).
  const table: [p: number, df: number, t: number][] = [
    [0.975, 1, 12.7062047361747],
    [0.975, 2, 4.30265272974946],
    [0.975, 5, 2.57058183563631],
    [0.975, 10, 2.22813885198627],
    [0.975, 30, 2.04227245630124],
    [0.95, 4, 2.13184678632665],
    [0.995, 3, 5.84090930973337],
    [0.9, 1, 3.07768353717525],
    [0.999, 20, 3.55180834320333],
  ];
  it.each(table)('t(%f, %f) matches the table', (p, df, t) => {
    expect(Math.abs(studentTQuantile(p, df) - t)).toBeLessThan(1e-6);
    expect(Math.abs(studentTQuantile(1 - p, df) + t)).toBeLessThan(1e-6);
  });

  it('matches the closed forms for df = 1 (Cauchy) and df = 2, far into the tails', () => {
    for (const p of [1e-10, 1e-4, 0.01, 0.2, 0.4, 0.6, 0.9, 0.999]) {
      const cauchy = -1 / Math.tan(Math.PI * p); // = tan(π(p − ½)) without the rounding of p − ½
      const two = (2 * p - 1) / Math.sqrt(2 * p * (1 - p));
      expect(Math.abs(studentTQuantile(p, 1) - cauchy) / Math.max(1, Math.abs(cauchy))).toBeLessThan(1e-9);
      expect(Math.abs(studentTQuantile(p, 2) - two) / Math.max(1, Math.abs(two))).toBeLessThan(1e-9);
    }
  });

  it('tends to the normal quantile for large df (Cornish–Fisher first term)', () => {
    const z = 1.959963984540054;
    const df = 1e5;
    expect(Math.abs(studentTQuantile(0.975, df) - (z + (z ** 3 + z) / (4 * df)))).toBeLessThan(1e-8);
  });

  it('is the median at ½ and ±∞ at 0 and 1, and rejects invalid input', () => {
    expect(studentTQuantile(0.5, 3)).toBe(0);
    expect(studentTQuantile(0, 3)).toBe(-Infinity);
    expect(studentTQuantile(1, 3)).toBe(Infinity);
    expect(() => studentTQuantile(1.5, 3)).toThrow(RangeError);
    expect(() => studentTQuantile(0.5, 0)).toThrow(RangeError);
  });

  it('handles fractional df (Welch) monotonically between integer df', () => {
    const t25 = studentTQuantile(0.975, 2.5);
    expect(t25).toBeLessThan(studentTQuantile(0.975, 2));
    expect(t25).toBeGreaterThan(studentTQuantile(0.975, 3));
    expect(studentTCdf(t25, 2.5)).toBeCloseTo(0.975, 12);
  });
});

describe('studentTCdf', () => {
  it('matches the closed forms for df = 1 and df = 2', () => {
    for (const t of [-50, -3, -1, -0.2, 0, 0.5, 2, 40]) {
      expect(studentTCdf(t, 1)).toBeCloseTo(0.5 + Math.atan(t) / Math.PI, 12);
      expect(studentTCdf(t, 2)).toBeCloseTo(0.5 + t / (2 * Math.sqrt(2 + t * t)), 12);
    }
  });

  it('round-trips with the quantile', () => {
    for (const df of [1, 2, 3.7, 7, 24.9, 120, 5000]) {
      for (const p of [1e-8, 0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 0.9999]) {
        expect(Math.abs(studentTCdf(studentTQuantile(p, df), df) - p) / p).toBeLessThan(1e-9);
      }
      for (const t of [-6, -1.5, 0.3, 2.2]) expect(studentTQuantile(studentTCdf(t, df), df)).toBeCloseTo(t, 8);
    }
  });

  it('gives the table tail at a critical value', () => {
    expect(studentTCdf(2.2281388519863, 10)).toBeCloseTo(0.975, 10);
    expect(studentTCdf(Infinity, 4)).toBe(1);
    expect(studentTCdf(-Infinity, 4)).toBe(0);
  });
});

describe('normalQuantile', () => {
  it('matches the standard normal table', () => {
    expect(normalQuantile(0.975)).toBeCloseTo(1.959964, 6);
    expect(normalQuantile(0.5)).toBe(0);
    expect(normalQuantile(0.01)).toBeCloseTo(-2.326348, 6);
    expect(normalQuantile(0.999)).toBeCloseTo(3.090232, 6);
    expect(normalQuantile(0.8413447460685429)).toBeCloseTo(1, 6);
    expect(normalQuantile(1e-10)).toBeCloseTo(-6.361340902, 5);
  });
});

describe('tInterval', () => {
  it('matches the textbook interval mean ± t(0.975, n−1)·s/√n', () => {
    const xs = [2, 4, 4, 4, 5, 5, 7, 9];
    const halfWidth = 2.36462425159278 * (Math.sqrt(32 / 7) / Math.sqrt(8)); // t(0.975, 7) from the table
    const interval = tInterval(xs);
    expect(interval.n).toBe(8);
    expect(interval.mean).toBe(5);
    expect(interval.halfWidth).toBeCloseTo(halfWidth, 8);
    expect(interval.low).toBeCloseTo(5 - halfWidth, 8);
    expect(interval.high).toBeCloseTo(5 + halfWidth, 8);
    expect(interval.halfWidth).toBeCloseTo(1.7875, 4);
  });

  it('narrows at a lower confidence', () => {
    const xs = [1, 3, 2, 5, 4];
    const halfWidth90 = tInterval(xs, 0.9).halfWidth;
    const halfWidth95 = tInterval(xs, 0.95).halfWidth;
    expect(halfWidth90).toBeCloseTo(2.13184678632665 * Math.sqrt(2.5 / 5), 8);
    expect(halfWidth90!).toBeLessThan(halfWidth95!);
  });

  it('returns nulls, not infinities, with fewer than 2 values (JSON-safe)', () => {
    expect(tInterval([3])).toEqual({ n: 1, mean: 3, low: null, high: null, halfWidth: null });
    expect(tInterval([])).toEqual({ n: 0, mean: null, low: null, high: null, halfWidth: null });
    expect(JSON.parse(JSON.stringify(tInterval([3])))).toEqual(tInterval([3]));
  });
});

describe('welchTest', () => {
  it("reproduces Wikipedia's example (t = 2.46, df ≈ 25, p ≈ 0.021) with b − a as the difference", () => {
    const result = welchTest(A1, A2);
    expect(result.difference).toBeCloseTo(22.98666667 - 20.82, 6);
    expect(result.t!).toBeCloseTo(2.46, 2);
    expect(result.df!).toBeGreaterThan(24.9);
    expect(result.df!).toBeLessThan(25.0);
    expect(result.p!).toBeCloseTo(0.021, 3);
  });

  it('agrees with an independent computation of the Welch formulas', () => {
    const mean1 = A1.reduce((s, x) => s + x, 0) / A1.length;
    const mean2 = A2.reduce((s, x) => s + x, 0) / A2.length;
    const v1 = A1.reduce((s, x) => s + (x - mean1) ** 2, 0) / (A1.length - 1) / A1.length;
    const v2 = A2.reduce((s, x) => s + (x - mean2) ** 2, 0) / (A2.length - 1) / A2.length;
    const df = (v1 + v2) ** 2 / (v1 ** 2 / 14 + v2 ** 2 / 14);
    const result = welchTest(A1, A2);
    expect(result.t).toBeCloseTo((mean2 - mean1) / Math.sqrt(v1 + v2), 10);
    expect(result.df).toBeCloseTo(df, 10);
    const halfWidth = studentTQuantile(0.975, df) * Math.sqrt(v1 + v2);
    expect(result.low).toBeCloseTo(mean2 - mean1 - halfWidth, 10);
    expect(result.high).toBeCloseTo(mean2 - mean1 + halfWidth, 10);
    // At the CI's edge the test is exactly at its 5% level.
    expect(welchTest(A1, A2.map((x) => x - result.low!)).p).toBeCloseTo(0.05, 8);
  });

  it('is antisymmetric in its arguments', () => {
    const forward = welchTest(A1, A2);
    const backward = welchTest(A2, A1);
    expect(backward.t).toBeCloseTo(-forward.t!, 12);
    expect(backward.p).toBeCloseTo(forward.p!, 12);
    expect(backward.low).toBeCloseTo(-forward.high!, 12);
  });

  it('handles samples without spread and too-small samples', () => {
    expect(welchTest([2, 2, 2], [2, 2])).toEqual({ difference: 0, low: 0, high: 0, t: 0, df: null, p: 1 });
    expect(welchTest([1, 1], [3, 3, 3])).toEqual({ difference: 2, low: 2, high: 2, t: null, df: null, p: 0 });
    expect(welchTest([1], [3, 4])).toEqual({ difference: 2.5, low: null, high: null, t: null, df: null, p: null });
    expect(welchTest([], [3, 4]).difference).toBeNull();
  });

  it('uses df = n − 1 when one arm has no spread', () => {
    expect(welchTest([5, 5, 5], [1, 2, 3, 4]).df).toBeCloseTo(3, 12);
  });
});

describe('seededRandom and bootstrapInterval', () => {
  it('the PRNG is deterministic per seed and uniform-looking', () => {
    const first = seededRandom(42);
    const again = seededRandom(42);
    const other = seededRandom(43);
    const xs = Array.from({ length: 10_000 }, () => first());
    expect(Array.from({ length: 10_000 }, () => again())).toEqual(xs);
    expect(other()).not.toBe(xs[0]);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(mean(xs)).toBeCloseTo(0.5, 1);
  });

  it('is deterministic, contains the mean, and agrees with the t interval on a symmetric sample', () => {
    const interval = bootstrapInterval(A1);
    expect(bootstrapInterval(A1)).toEqual(interval);
    expect(bootstrapInterval(A1, { seed: 2 })).not.toEqual(interval);
    expect(interval.low!).toBeLessThan(interval.mean!);
    expect(interval.high!).toBeGreaterThan(interval.mean!);
    const t = tInterval(A1);
    // The percentile bootstrap is a little narrower than t at n = 15 (it uses z-like tails and √((n−1)/n) scale).
    expect(interval.high! - interval.low!).toBeGreaterThan(0.75 * (t.high! - t.low!));
    expect(interval.high! - interval.low!).toBeLessThan(1.05 * (t.high! - t.low!));
  });

  it('returns nulls for fewer than 2 values', () => {
    expect(bootstrapInterval([4])).toEqual({ n: 1, mean: 4, low: null, high: null });
    expect(bootstrapInterval([])).toEqual({ n: 0, mean: null, low: null, high: null });
  });

  it('bootstraps the difference of means deterministically around the Welch interval', () => {
    const interval = bootstrapDifferenceInterval(A1, A2);
    expect(bootstrapDifferenceInterval(A1, A2)).toEqual(interval);
    expect(interval.difference).toBeCloseTo(mean(A2) - mean(A1), 12);
    const welch = welchTest(A1, A2);
    expect(Math.abs(interval.low! - welch.low!)).toBeLessThan(0.4);
    expect(Math.abs(interval.high! - welch.high!)).toBeLessThan(0.4);
    expect(bootstrapDifferenceInterval([1], A2)).toEqual({ difference: mean(A2) - 1, low: null, high: null });
  });
});

describe('permutationTest', () => {
  it('enumerates all splits exactly on tiny samples', () => {
    // {1,2} vs {3,4}: of the 6 splits, only the observed one and its mirror reach |Δ| = 2.
    expect(permutationTest([1, 2], [3, 4])).toEqual({ difference: 2, p: 2 / 6 });
    // {1,2,3} vs {4,5,6}: 2 of C(6,3) = 20 splits.
    expect(permutationTest([1, 2, 3], [4, 5, 6])).toEqual({ difference: 3, p: 2 / 20 });
    // {1,2,3} vs {4,5,7}: |Δ| = |22 − 2·sum(a)|/3 ≥ 10/3 only for sum(a) = 6 or 16, i.e. {1,2,3} and {4,5,7}.
    expect(permutationTest([1, 2, 3], [4, 5, 7]).p).toBeCloseTo(2 / 20, 12);
    expect(permutationTest([3, 1], [2, 4]).p).toBeCloseTo(4 / 6, 12); // |Δ| ≥ 1 for a = {1,3}, {2,4}, {1,2}, {3,4}; 0 for {2,3}, {1,4}
  });

  it('counts ties despite float rounding', () => {
    expect(permutationTest([0.1, 0.2], [0.3, 0.4]).p).toBeCloseTo(2 / 6, 12);
  });

  it('uses Monte Carlo with the (count + 1) / (n + 1) correction beyond the budget', () => {
    const result = permutationTest([1, 2, 3], [4, 5, 6], { permutations: 5 });
    expect(result.p! * 6).toBeCloseTo(Math.round(result.p! * 6), 12);
    expect(result.p!).toBeGreaterThanOrEqual(1 / 6);
    expect(permutationTest([1, 2, 3], [4, 5, 6], { permutations: 5 })).toEqual(result);
    const large = permutationTest(A1, A2, { permutations: 20_000 });
    // Close to Welch's p on these near-normal samples.
    expect(large.p!).toBeGreaterThan(0.012);
    expect(large.p!).toBeLessThan(0.03);
  });

  it('is null on an empty sample', () => {
    expect(permutationTest([], [1])).toEqual({ difference: null, p: null });
  });
});

describe('hedgesG', () => {
  it('matches the formula d·(1 − 3/(4(n₁+n₂) − 9))', () => {
    // Means 3 and 5, both variances 2.5: d = 2/√2.5 = 1.26491, J = 1 − 3/31.
    expect(hedgesG([1, 2, 3, 4, 5], [3, 4, 5, 6, 7])).toBeCloseTo(1.142500, 6);
    expect(hedgesG([3, 4, 5, 6, 7], [1, 2, 3, 4, 5])).toBeCloseTo(-1.142500, 6);
  });

  it('is null when undefined', () => {
    expect(hedgesG([1], [2, 3])).toBeNull();
    expect(hedgesG([2, 2], [3, 3])).toBeNull();
  });
});

describe('curveBand', () => {
  it('bands ragged curves per step over the seeds that have it, sorted by step', () => {
    const band = curveBand([
      [
        { step: 20, value: 3 },
        { step: 0, value: 1 },
        { step: 10, value: 2 },
      ],
      [
        { step: 0, value: 3 },
        { step: 10, value: 4 },
      ],
      [{ step: 30, value: 9 }],
    ]);
    expect(band.map((point) => point.step)).toEqual([0, 10, 20, 30]);
    // Step 0: values 1 and 3, sd √2, half-width t(0.975, 1)·√2/√2 = 12.7062.
    expect(band[0]).toMatchObject({ step: 0, n: 2, mean: 2 });
    expect(band[0].low).toBeCloseTo(2 - 12.7062047361747, 8);
    expect(band[0].high).toBeCloseTo(2 + 12.7062047361747, 8);
    expect(band[2]).toEqual({ step: 20, n: 1, mean: 3, low: null, high: null });
    expect(band[3]).toEqual({ step: 30, n: 1, mean: 9, low: null, high: null });
  });

  it('counts a seed once at a repeated step', () => {
    const band = curveBand([
      [
        { step: 5, value: 1 },
        { step: 5, value: 2 },
      ],
    ]);
    expect(band).toEqual([{ step: 5, n: 1, mean: 2, low: null, high: null }]);
  });
});

describe('areaUnderCurve', () => {
  it('is the trapezoid area over the step span', () => {
    expect(areaUnderCurve([
      { step: 0, value: 0 },
      { step: 10, value: 10 },
    ])).toBe(5);
    // Uneven steps: area 0.5 + 2 over a span of 3.
    expect(areaUnderCurve([
      { step: 3, value: 1 },
      { step: 0, value: 0 },
      { step: 1, value: 1 },
    ])).toBeCloseTo(2.5 / 3, 12);
    expect(areaUnderCurve([
      { step: 100, value: 0.7 },
      { step: 200, value: 0.7 },
      { step: 400, value: 0.7 },
    ])).toBeCloseTo(0.7, 12);
  });

  it('is the value for one point and null for none', () => {
    expect(areaUnderCurve([{ step: 4, value: 0.3 }])).toBe(0.3);
    expect(areaUnderCurve([])).toBeNull();
  });
});
