import { describe, expect, it } from 'vitest';
import { clampSmoothing, emaSmooth, MAX_SMOOTHING } from './ema.ts';

describe('emaSmooth', () => {
  it('returns the values unchanged at weight 0', () => {
    const values = [1, null, 3, 2];
    const out = emaSmooth(values, 0);
    expect(out).toEqual(values);
    expect(out).not.toBe(values);
  });

  it('is debiased: the first point is the first value, a constant stays constant', () => {
    expect(emaSmooth([5], 0.9)[0]).toBeCloseTo(5, 12);
    for (const v of emaSmooth([2, 2, 2, 2, 2], 0.8)) expect(v).toBeCloseTo(2, 12);
  });

  it('matches the W&B recurrence', () => {
    const w = 0.6;
    const ys = [1, 3, 2, 5];
    let last = 0;
    const expected = ys.map((y, i) => {
      last = last * w + (1 - w) * y;
      return last / (1 - w ** (i + 1));
    });
    const out = emaSmooth(ys, w);
    out.forEach((v, i) => expect(v).toBeCloseTo(expected[i], 12));
  });

  it('skips nulls and non-finite values without advancing the average', () => {
    const withGaps = emaSmooth([1, null, NaN, 3, Infinity, 2], 0.5);
    const dense = emaSmooth([1, 3, 2], 0.5);
    expect(withGaps[1]).toBeNull();
    expect(withGaps[2]).toBeNull();
    expect(withGaps[4]).toBeNull();
    expect([withGaps[0], withGaps[3], withGaps[5]]).toEqual(dense);
  });

  it('leaves the input untouched and keeps its length', () => {
    const values = [1, 2, 3];
    const out = emaSmooth(values, 0.9);
    expect(values).toEqual([1, 2, 3]);
    expect(out).toHaveLength(3);
  });

  it('smooths: a spike is damped', () => {
    const out = emaSmooth([0, 0, 0, 10, 0, 0], 0.9);
    expect(out[3]!).toBeLessThan(10);
    expect(out[3]!).toBeGreaterThan(0);
  });
});

describe('clampSmoothing', () => {
  it('keeps weights within [0, MAX_SMOOTHING]', () => {
    expect(clampSmoothing(-1)).toBe(0);
    expect(clampSmoothing(NaN)).toBe(0);
    expect(clampSmoothing(1)).toBe(MAX_SMOOTHING);
    expect(clampSmoothing(0.6)).toBe(0.6);
  });
});
