import { describe, expect, it } from 'vitest';
import { visibleText } from '../timeline/draw.ts';
import { formatEpisodeTime, formatReward, shortHash } from './format.ts';

describe('episode formatting', () => {
  it('shows today’s episodes by time only and older ones with their date', () => {
    const now = new Date(2026, 10, 30, 12, 0, 0);
    expect(formatEpisodeTime(new Date(2026, 10, 30, 9, 5, 7).toISOString(), now)).toBe('09:05:07');
    expect(formatEpisodeTime(new Date(2026, 10, 2, 23, 0, 1).toISOString(), now)).toBe('Nov 2 23:00:01');
    expect(formatEpisodeTime('not a time', now)).toBe('not a time');
  });

  it('prints rewards compactly and says when there is none', () => {
    expect(formatReward(null)).toBe('—');
    expect(formatReward(1)).toBe('1');
    expect(formatReward(0.123456)).toBe('0.123');
    expect(formatReward(12.34)).toBe('12.3');
  });

  it('shortens hashes to tell versions apart', () => {
    expect(shortHash('sha256:0123456789abcdef')).toBe('01234567');
    expect(shortHash(null)).toBe('—');
  });

  it('makes whitespace tokens visible in the merge view', () => {
    expect(visibleText(' a\n\t')).toBe('·a↵⇥');
    expect(visibleText('Ġhello')).toBe('·hello');
  });
});
