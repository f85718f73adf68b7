import { describe, expect, it } from 'vitest';
import { formatCount, formatDuration, shortenId } from './format.ts';

describe('formatDuration', () => {
  it('shows the two most significant units', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(59.9)).toBe('59s');
    expect(formatDuration(249)).toBe('4m 09s');
    expect(formatDuration(7_500)).toBe('2h 05m');
    expect(formatDuration(3 * 86_400 + 4 * 3_600 + 59)).toBe('3d 4h');
  });

  it('never shows a negative time', () => {
    expect(formatDuration(-5)).toBe('0s');
  });
});

describe('formatCount', () => {
  it('groups thousands', () => {
    expect(formatCount(999)).toBe('999');
    expect(formatCount(1_234_567)).toBe('1\u202f234\u202f567');
  });
});

describe('shortenId', () => {
  it('keeps short ids whole and cuts long ones in the middle', () => {
    expect(shortenId('abc')).toBe('abc');
    expect(shortenId('12D3KooWabcdefghijklmnopqrstuvwxyz')).toBe('12D3KooW…wxyz');
  });
});
