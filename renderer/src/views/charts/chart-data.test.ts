import { describe, expect, it } from 'vitest';
import { alignSeries, columnLayout, isMainColumn, lastIndex, nearestIndex, NEAREST_VALUE_WINDOW, plotColumns, stepExtent, valueExtent } from './chart-data.ts';
import type { ChartSeries } from './chart-types.ts';

const series = (key: string, x: number[], y: (number | null)[], extra: Partial<ChartSeries> = {}): ChartSeries => ({
  key,
  label: key,
  x,
  y,
  colour: '--accent',
  ...extra,
});

describe('alignSeries', () => {
  it('aligns series with different steps on the union of their steps', () => {
    const aligned = alignSeries([series('a', [1, 2, 4], [10, 20, 40]), series('b', [2, 3, 4, 6], [0.2, 0.3, 0.4, 0.6])]);
    expect(aligned.x).toEqual([1, 2, 3, 4, 6]);
    expect(aligned.y[0]).toEqual([10, 20, null, 40, null]);
    expect(aligned.y[1]).toEqual([null, 0.2, 0.3, 0.4, 0.6]);
    expect(aligned.counts).toEqual([3, 4]);
    expect(stepExtent(aligned)).toEqual([1, 6]);
  });

  it('keeps shared steps as they are', () => {
    const x = [0, 1, 2];
    const aligned = alignSeries([series('a', x, [1, 2, 3]), series('b', [0, 1, 2], [3, 2, 1])]);
    expect(aligned.x).toEqual(x);
    expect(aligned.y).toEqual([
      [1, 2, 3],
      [3, 2, 1],
    ]);
  });

  it('aligns bands with their series and treats NaN as missing', () => {
    const aligned = alignSeries([
      series('mean', [1, 3], [0.5, NaN], { band: { lower: [0.4, 0.5], upper: [0.6, 0.7] } }),
      series('other', [2], [1]),
    ]);
    expect(aligned.y[0]).toEqual([0.5, null, null]);
    expect(aligned.lower[0]).toEqual([0.4, null, 0.5]);
    expect(aligned.upper[0]).toEqual([0.6, null, 0.7]);
    expect(aligned.lower[1]).toBeNull();
    expect(aligned.counts[0]).toBe(1);
  });

  it('tells whether a log axis can draw the data', () => {
    expect(alignSeries([series('a', [1, 2], [0.1, 3])]).allPositive).toBe(true);
    expect(alignSeries([series('a', [1, 2], [0, 3])]).allPositive).toBe(false);
    expect(alignSeries([series('a', [1], [1], { band: { lower: [-1], upper: [2] } })]).allPositive).toBe(false);
    expect(alignSeries([series('a', [1], [null])]).allPositive).toBe(false);
  });

  it('finds isolated points (no neighbours of their own) in union indexes', () => {
    const aligned = alignSeries([series('a', [0, 1, 2, 3, 4], [1, null, 2, 3, null]), series('b', [5], [9])]);
    expect(aligned.isolated[0]).toEqual([0]);
    expect(aligned.isolated[1]).toEqual([5]);
  });

  it('handles no series and no data', () => {
    const empty = alignSeries([]);
    expect(empty.x).toEqual([]);
    expect(empty.hasData).toBe(false);
    expect(stepExtent(empty)).toBeNull();
  });
});

describe('columns', () => {
  it('lays out band edges, the raw line and the smoothed line per series', () => {
    const layout = columnLayout([true, false], true);
    expect(layout.map((r) => `${r.kind}${r.series}`)).toEqual(['lower0', 'upper0', 'raw0', 'smoothed0', 'raw1', 'smoothed1']);
    expect(layout.filter((r) => isMainColumn(r, true)).map((r) => r.kind)).toEqual(['smoothed', 'smoothed']);
    expect(columnLayout([false], false).map((r) => r.kind)).toEqual(['raw']);
  });

  it('draws the smoothed lines only when many runs are overlaid, the raw ones when smoothing is off', () => {
    expect(columnLayout([false, false, false], true).map((r) => r.kind)).toEqual(['smoothed', 'smoothed', 'smoothed']);
    expect(columnLayout([false, false, false], false).map((r) => r.kind)).toEqual(['raw', 'raw', 'raw']);
  });

  it('smooths only what is drawn: raw columns stay the data', () => {
    const aligned = alignSeries([series('a', [1, 2, 3], [0, 10, 0])]);
    const layout = columnLayout([false], true);
    const [raw, smooth] = plotColumns(aligned, layout, 0.6, undefined);
    expect(raw).toEqual([0, 10, 0]);
    expect(smooth[1]!).toBeLessThan(10);
    expect(aligned.y[0]).toEqual([0, 10, 0]);
  });

  it('clamps band edges into an explicit y domain', () => {
    const aligned = alignSeries([series('a', [1, 2], [0.9, 0.95], { band: { lower: [-0.2, 0.8], upper: [1.3, 1.1] } })]);
    const [lower, upper] = plotColumns(aligned, columnLayout([true], false), 0, [0, 1]);
    expect(lower).toEqual([0, 0.8]);
    expect(upper).toEqual([1, 1]);
  });
});

describe('legend lookups', () => {
  it('finds the nearest value within the window, and the last value', () => {
    const column = [null, 1, null, null, 4, null];
    expect(nearestIndex(column, 1)).toBe(1);
    expect(nearestIndex(column, 2)).toBe(1);
    expect(nearestIndex(column, 3)).toBe(4);
    expect(nearestIndex([null, null], 0)).toBe(-1);
    expect(nearestIndex(column, 99)).toBe(-1);
    const far = [1, ...new Array(NEAREST_VALUE_WINDOW + 5).fill(null)];
    expect(nearestIndex(far, far.length - 1)).toBe(-1);
    expect(lastIndex(column)).toBe(4);
    expect(lastIndex([null])).toBe(-1);
  });

  it('measures the value extent', () => {
    expect(valueExtent([[1, null, 3], [-2]])).toEqual([-2, 3]);
    expect(valueExtent([[null]])).toBeNull();
  });
});
