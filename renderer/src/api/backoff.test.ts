import { describe, expect, it } from 'vitest';
import { RECONNECT_BASE_MS, RECONNECT_MAX_MS, reconnectDelayMs } from './backoff.ts';

describe('reconnectDelayMs', () => {
  it('doubles from one second', () => {
    expect([0, 1, 2, 3].map((attempt) => reconnectDelayMs(attempt))).toEqual([1, 2, 4, 8].map((n) => n * RECONNECT_BASE_MS));
  });

  it('stops growing at the cap, even after very many attempts', () => {
    expect(reconnectDelayMs(10)).toBe(RECONNECT_MAX_MS);
    expect(reconnectDelayMs(10_000)).toBe(RECONNECT_MAX_MS);
  });

  it('adds at most 20% jitter', () => {
    expect(reconnectDelayMs(0, 0.999)).toBeLessThanOrEqual(RECONNECT_BASE_MS * 1.2);
    expect(reconnectDelayMs(0, 0.5)).toBeGreaterThan(RECONNECT_BASE_MS);
  });
});
