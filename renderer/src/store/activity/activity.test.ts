import { describe, expect, it } from 'vitest';
import { createAppStore } from '../index.ts';
import { activitySelectors } from './selectors.ts';
import { MAX_LOG_ENTRIES } from './slice.ts';

const line = (msg: string, level: 'info' | 'warn' | 'error' = 'info') => ({ level, msg, time: '2026-01-01T00:00:00Z' });

describe('activity slice', () => {
  it('keeps only the newest lines, numbered in arrival order', () => {
    const store = createAppStore();
    for (let i = 0; i < MAX_LOG_ENTRIES + 5; i++) store.getState().logReceived(line(`m${i}`));
    const { logs } = store.getState().activity;
    expect(logs).toHaveLength(MAX_LOG_ENTRIES);
    expect(logs[0]).toMatchObject({ msg: 'm5', seq: 5 });
    expect(logs.at(-1)).toMatchObject({ msg: `m${MAX_LOG_ENTRIES + 4}` });
  });
});

describe('activity selectors', () => {
  it('lists recent lines newest first and counts warnings', () => {
    const store = createAppStore();
    ['a', 'b', 'c'].forEach((msg) => store.getState().logReceived(line(msg)));
    store.getState().logReceived(line('d', 'warn'));
    store.getState().logReceived(line('e', 'error'));
    const { activity } = store.getState();
    expect(activitySelectors.recentLogs(activity, 2).map((l) => l.msg)).toEqual(['e', 'd']);
    expect(activitySelectors.warningCount(activity)).toBe(2);
  });
});
