import { describe, expect, it } from 'vitest';
import type { TrainStepSummary } from '../../../../swarm/common/api.ts';
import { createAppStore } from '../index.ts';
import { modelsSelectors } from './selectors.ts';

function step(n: number, extra: Pick<TrainStepSummary, 'rewardStd' | 'successRate' | 'naiveTokens'> = {}): TrainStepSummary {
  return {
    model: 'tiny',
    step: n,
    policyVersion: n + 1,
    time: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    groups: 2,
    episodes: 8,
    samples: 4,
    rewardMean: n / 10,
    metrics: {
      loss: 1 / (n + 1),
      clipFraction: 0.1,
      kl: 0.01 * n,
      entropy: 2,
      gradNorm: 1,
      tokens: 2000,
      trainedTokens: 500,
      microBatches: 1,
      timeMs: 500,
    },
    checkpoint: n % 10 === 0 ? `/data/checkpoints/tiny/step-${n}` : null,
    ...extra,
  };
}

describe('models slice', () => {
  it('appends steps in order and ignores ones it already holds (poll and event may overlap)', () => {
    const store = createAppStore();
    store.getState().trainStepsReceived('tiny', [step(2), step(1)]);
    store.getState().trainStepsReceived('tiny', [step(2), step(3)]);
    const training = modelsSelectors.training(store.getState().models, 'tiny');
    expect(training.steps.map((s) => s.step)).toEqual([1, 2, 3]);
    expect(training.stepsVersion).toBe(2);
    expect(modelsSelectors.lastStep(training)).toBe(3);
  });

  it('gives a stable empty training record for an unknown model', () => {
    const store = createAppStore();
    expect(modelsSelectors.training(store.getState().models, 'x')).toBe(
      modelsSelectors.training(store.getState().models, null),
    );
  });
});

describe('step series', () => {
  it('turns steps into plot columns: tokens/s from the update time, gaps where a metric is missing', () => {
    const steps = [step(1), step(2, { rewardStd: 0.5, naiveTokens: 6000 })];
    const series = modelsSelectors.stepSeries(steps);
    expect(series.step).toEqual([1, 2]);
    expect(series.tokensPerSecond).toEqual([4000, 4000]);
    expect(series.rewardStd).toEqual([null, 0.5]);
    expect(series.mergeRatio).toEqual([null, 3]);
    expect(modelsSelectors.rewardBand(series)).toEqual({ lower: [null, -0.3], upper: [null, 0.7] });
    expect(modelsSelectors.hasValues(series.success)).toBe(false);
    // Cached per steps array: selecting twice builds nothing new.
    expect(modelsSelectors.stepSeries(steps)).toBe(series);
  });

  it('lists checkpoints newest first', () => {
    const steps = Array.from({ length: 25 }, (_, i) => step(i + 1));
    expect(modelsSelectors.checkpoints(steps).map((s) => s.step)).toEqual([20, 10]);
  });
});
