import { describe, expect, it } from 'vitest';
import { decimalsFor, formatStep, formatValue, MISSING, tickLabels } from './format.ts';

describe('formatValue', () => {
  it('shows a missing value as a dash', () => {
    expect(formatValue(null)).toBe(MISSING);
    expect(formatValue(NaN, 'percent')).toBe(MISSING);
  });

  it('writes percents without trailing zeros', () => {
    expect(formatValue(0, 'percent')).toBe('0%');
    expect(formatValue(1, 'percent')).toBe('100%');
    expect(formatValue(0.4567, 'percent')).toBe('45.7%');
    expect(formatValue(0.5, 'percent')).not.toContain('.0');
  });

  it('writes plain numbers with a few significant digits', () => {
    expect(formatValue(0.123456)).toBe('0.1235');
    expect(formatValue(12345.6)).toBe('12346');
    expect(formatValue(0.00001234)).toMatch(/e-5$/);
  });

  it('writes compact counts, ratios and durations', () => {
    expect(formatValue(12_345, 'compact')).toBe('12.3k');
    expect(formatValue(2_500_000, 'compact')).toBe('2.5M');
    expect(formatValue(3.456, 'ratio')).toBe('3.456×');
    expect(formatValue(250, 'ms')).toBe('250 ms');
    expect(formatValue(1500, 'ms')).toBe('1.5 s');
    expect(formatValue(90_000, 'ms')).toBe('1.5 min');
  });
});

describe('tickLabels', () => {
  it('uses one unit and decimals for all ticks', () => {
    expect(tickLabels([0, 500, 1000, 1500], 'ms')).toEqual(['0.0 s', '0.5 s', '1.0 s', '1.5 s']);
    expect(tickLabels([0, 5000, 10_000], 'compact')).toEqual(['0', '5k', '10k']);
    expect(tickLabels([0, 0.25, 0.5], 'percent')).toEqual(['0%', '25%', '50%']);
  });

  it('labels log ticks one by one', () => {
    expect(tickLabels([0.001, 0.01, 0.1, 1], 'number', { log: true })).toEqual(['0.001', '0.01', '0.1', '1']);
  });
});

describe('formatStep and decimalsFor', () => {
  it('writes steps as integers, compact when long', () => {
    expect(formatStep(12)).toBe('12');
    expect(formatStep(25_000)).toBe('25k');
  });
  it('finds the decimals a step needs', () => {
    expect(decimalsFor(0.25)).toBe(2);
    expect(decimalsFor(5)).toBe(0);
    expect(decimalsFor(0.1 + 0.2)).toBe(1);
  });
});
