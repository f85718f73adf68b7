import { beforeEach, describe, expect, it } from 'vitest';
import { createAppStore } from '../index.ts';
import { connectionSelectors } from './selectors.ts';
import { initialConnectionState } from './slice.ts';

describe('connection slice', () => {
  let store = createAppStore();
  beforeEach(() => {
    store = createAppStore();
  });

  it('starts connecting', () => {
    expect(store.getState().connection).toEqual(initialConnectionState);
  });

  it('counts failed attempts until the connection is live again', () => {
    store.getState().connectionLost('refused', 1_000);
    store.getState().connectionStarted();
    store.getState().connectionLost('refused', 3_000);
    expect(store.getState().connection).toMatchObject({ phase: 'disconnected', failedAttempts: 2, retryAt: 3_000, lastError: 'refused' });
    store.getState().connectionLive();
    expect(store.getState().connection).toEqual({ phase: 'live', failedAttempts: 0, retryAt: null, lastError: null });
  });

  it('stops retrying when unauthorised', () => {
    store.getState().connectionLost('refused', 1_000);
    store.getState().connectionUnauthorised('bad token');
    expect(store.getState().connection).toMatchObject({ phase: 'unauthorised', retryAt: null, lastError: 'bad token' });
  });
});

describe('connection selectors', () => {
  const disconnected = { phase: 'disconnected' as const, failedAttempts: 1, retryAt: 10_000, lastError: 'x' };

  it('counts down whole seconds to the retry, never below zero', () => {
    expect(connectionSelectors.retryInSeconds(disconnected, 5_500)).toBe(5);
    expect(connectionSelectors.retryInSeconds(disconnected, 12_000)).toBe(0);
    expect(connectionSelectors.retryInSeconds({ ...disconnected, phase: 'live' }, 0)).toBeNull();
  });

  it('labels every phase', () => {
    expect(connectionSelectors.connectionLabel(disconnected, 7_000)).toBe('Disconnected — retry in 3s');
    expect(connectionSelectors.connectionLabel(disconnected, 10_000)).toBe('Disconnected — retrying…');
    expect(connectionSelectors.connectionLabel(initialConnectionState, 0)).toBe('Connecting…');
    expect(connectionSelectors.connectionLabel({ ...disconnected, phase: 'live' }, 0)).toBe('Live');
    expect(connectionSelectors.connectionLabel({ ...disconnected, phase: 'unauthorised' }, 0)).toBe('Not authorised');
  });
});
