import { describe, expect, it } from 'vitest';
import { armAnalysis } from '../../store/research/testing/fixtures.ts';
import { bandSeries } from './bands.ts';

describe('study band series', () => {
  it('draws one mean line with its band per arm, steps ascending, arms without points left out', () => {
    const analysis = {
      metric: 'final-eval-success',
      best: null,
      decision: null,
      criterion: '',
      threats: [],
      arms: [
        armAnalysis('a', {
          rewardBand: [
            { step: 2, n: 2, mean: 0.4, low: 0.3, high: 0.5 },
            { step: 1, n: 1, mean: 0.2, low: null, high: null },
          ],
        }),
        armAnalysis('b', { rewardBand: [] }),
        armAnalysis('c', { stage: 1, rewardBand: [{ step: 1, n: 1, mean: 0.1, low: null, high: null }] }),
      ],
    };
    const series = bandSeries(analysis, 'rewardBand', (i) => `c${i}`);
    expect(series.map((s) => s.label)).toEqual(['a (stage 1)', 'c (stage 2)']);
    expect(series[0]).toMatchObject({
      x: [1, 2],
      y: [0.2, 0.4],
      colour: 'c0',
      band: { lower: [null, 0.3], upper: [null, 0.5] },
    });
    expect(series[1].band).toBeUndefined();
  });
});
