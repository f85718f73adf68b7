import { describe, expect, it } from 'vitest';
import { createAppStore } from '../index.ts';
import { chartsSelectors } from './selectors.ts';
import { DEFAULT_SMOOTHING } from './slice.ts';

describe('charts slice', () => {
  it('starts with W&B-like smoothing, linear axes and no full-screen panel', () => {
    const { charts } = createAppStore().getState();
    expect(charts.smoothing).toBe(DEFAULT_SMOOTHING);
    expect(charts.logScale).toEqual([]);
    expect(charts.fullScreen).toBeNull();
  });

  it('keeps smoothing within [0, 0.99] at the slider resolution', () => {
    const store = createAppStore();
    store.getState().setChartSmoothing(2);
    expect(store.getState().charts.smoothing).toBe(0.99);
    store.getState().setChartSmoothing(-0.5);
    expect(store.getState().charts.smoothing).toBe(0);
    store.getState().setChartSmoothing(0.1 + 0.2);
    expect(store.getState().charts.smoothing).toBe(0.3);
    store.getState().setChartSmoothing(NaN);
    expect(store.getState().charts.smoothing).toBe(0);
  });

  it('turns the log scale on and off per panel', () => {
    const store = createAppStore();
    store.getState().setChartLogScale('loss', true);
    store.getState().setChartLogScale('loss', true);
    store.getState().setChartLogScale('kl', true);
    expect(store.getState().charts.logScale).toEqual(['loss', 'kl']);
    expect(chartsSelectors.isLogScale(store.getState().charts, 'loss')).toBe(true);
    store.getState().setChartLogScale('loss', false);
    expect(chartsSelectors.isLogScale(store.getState().charts, 'loss')).toBe(false);
    expect(chartsSelectors.isLogScale(store.getState().charts, 'kl')).toBe(true);
  });

  it('opens one panel full screen at a time and closes it', () => {
    const store = createAppStore();
    store.getState().showChartFullScreen('reward');
    store.getState().showChartFullScreen('loss');
    expect(chartsSelectors.isFullScreen(store.getState().charts, 'loss')).toBe(true);
    expect(chartsSelectors.isFullScreen(store.getState().charts, 'reward')).toBe(false);
    store.getState().showChartFullScreen(null);
    expect(store.getState().charts.fullScreen).toBeNull();
  });

  it('leaves the other slices alone', () => {
    const store = createAppStore();
    const before = store.getState().navigation;
    store.getState().setChartSmoothing(0.2);
    expect(store.getState().navigation).toBe(before);
  });
});
