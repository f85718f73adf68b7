import { describe, expect, it } from 'vitest';
import { INTEGER_INCREMENTS, integerTicks, integerXRange, logRange, niceStep, niceTicks, niceYRange } from './axis.ts';
import { tickLabels } from './format.ts';

describe('niceYRange', () => {
  it('gives [0, 1] for constant zero (not ±0.0000)', () => {
    expect(niceYRange(0, 0)).toEqual([0, 1]);
    expect(niceYRange(0, 0, { format: 'percent' })).toEqual([0, 1]);
  });

  it('centres a constant value at a readable scale without going below 0', () => {
    const [lo, hi] = niceYRange(5, 5);
    expect(lo).toBeLessThan(5);
    expect(hi).toBeGreaterThan(5);
    expect(lo).toBeGreaterThanOrEqual(0);
    expect(hi - lo).toBeLessThan(5);
    const [tinyLo, tinyHi] = niceYRange(1e-7, 1e-7);
    expect(tinyLo).toBeGreaterThanOrEqual(0);
    expect(tinyHi).toBeGreaterThan(1e-7);
  });

  it('handles a single point like a constant', () => {
    const [lo, hi] = niceYRange(0.37, 0.37);
    expect(lo).toBeLessThan(0.37);
    expect(hi).toBeGreaterThan(0.37);
  });

  it('shows a constant rate on the full [0, 1] percent axis', () => {
    expect(niceYRange(1, 1, { format: 'percent' })).toEqual([0, 1]);
    expect(niceYRange(0.5, 0.5, { format: 'percent' })).toEqual([0, 1]);
  });

  it('never extends below 0 for non-negative data, nor above 0 for non-positive data', () => {
    expect(niceYRange(0.01, 3)[0]).toBe(0);
    expect(niceYRange(-3, -0.01)[1]).toBe(0);
    const [lo, hi] = niceYRange(-2, 3);
    expect(lo).toBeLessThanOrEqual(-2);
    expect(hi).toBeGreaterThanOrEqual(3);
  });

  it('keeps rates within 100% unless the data goes past it', () => {
    expect(niceYRange(0.2, 0.99, { format: 'percent' })[1]).toBe(1);
    expect(niceYRange(0.2, 1.4, { format: 'percent' })[1]).toBeGreaterThanOrEqual(1.4);
  });

  it('covers the data and snaps to nice numbers', () => {
    const [lo, hi] = niceYRange(0.123, 0.877);
    expect(lo).toBeLessThanOrEqual(0.123);
    expect(hi).toBeGreaterThanOrEqual(0.877);
    expect(String(lo).length).toBeLessThan(6);
    expect(String(hi).length).toBeLessThan(6);
  });

  it('uses a fixed domain as given, and [0, 1] with no data', () => {
    expect(niceYRange(0.2, 0.3, { domain: [0, 1] })).toEqual([0, 1]);
    expect(niceYRange(null, null)).toEqual([0, 1]);
    expect(niceYRange(NaN, 1)).toEqual([0, 1]);
  });

  it('spans whole decades on a log axis', () => {
    expect(niceYRange(0.003, 0.4, { log: true })).toEqual([0.001, 1]);
    expect(logRange(10, 10)).toEqual([10, 100]);
    expect(logRange(0, 5)).toEqual([1, 10]);
    // A domain with a bound ≤ 0 cannot be drawn on a log axis: the data decides.
    expect(niceYRange(0.02, 0.5, { log: true, domain: [0, 1] })).toEqual([0.01, 1]);
  });
});

describe('x axis (steps)', () => {
  it('widens a single step without showing negative steps', () => {
    expect(integerXRange(0, 0)).toEqual([0, 1]);
    expect(integerXRange(5, 5)).toEqual([4, 6]);
    expect(integerXRange(3, 90)).toEqual([3, 90]);
    expect(integerXRange(null, null)).toEqual([0, 1]);
  });

  it('has integer ticks only, even over a short span', () => {
    for (const [min, max] of [
      [0, 3],
      [1, 2],
      [0, 5],
      [0, 7],
      [3, 10_000],
      [0.4, 1.6],
    ]) {
      const ticks = integerTicks(min, max);
      expect(ticks.length).toBeGreaterThan(0);
      for (const t of ticks) expect(Number.isInteger(t)).toBe(true);
    }
    expect(integerTicks(0, 5)).not.toContain(2.5);
    for (const incr of INTEGER_INCREMENTS) expect(Number.isInteger(incr)).toBe(true);
  });
});

describe('ticks and their labels', () => {
  it('picks 1-2-5 steps', () => {
    expect(niceStep(1, 5)).toBeCloseTo(0.2);
    expect(niceStep(10, 5)).toBe(2);
    expect(niceStep(0, 5)).toBe(1);
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
  });

  it('labels an all-zero percent axis as whole percents', () => {
    const [lo, hi] = niceYRange(0, 0, { format: 'percent' });
    const labels = tickLabels(niceTicks(lo, hi), 'percent');
    expect(labels[0]).toBe('0%');
    expect(labels[labels.length - 1]).toBe('100%');
    for (const label of labels) {
      expect(label).not.toMatch(/\.0+%/);
      expect(Number.parseFloat(label)).toBeLessThanOrEqual(100);
    }
  });

  it('gives all ticks the same, minimal number of decimals', () => {
    expect(tickLabels([0, 0.5, 1, 1.5], 'number')).toEqual(['0.0', '0.5', '1.0', '1.5']);
    expect(tickLabels([0, 2, 4], 'number')).toEqual(['0', '2', '4']);
    expect(tickLabels([0.1 + 0.2, 0.4], 'number')).toEqual(['0.3', '0.4']);
  });

  it('never labels a tick −0', () => {
    expect(tickLabels([-0.00001, 0.5, 1], 'number').join(' ')).not.toContain('-0.0');
  });
});
