import { describe, expect, it } from 'vitest';
import { columnLayout } from './chart-data.ts';
import { buildPlotOptions, RAW_ALPHA, yAxisWidth, yTickLabels, type PlotCallbacks, type PlotShape } from './uplot-options.ts';

const callbacks: PlotCallbacks = {
  showAllPoints: () => false,
  isolatedPoints: () => [3],
  onCursor: () => {},
  onXScale: () => {},
  onDraw: () => {},
};

function shape(overrides: Partial<PlotShape> = {}): PlotShape {
  return {
    series: [
      { label: 'run a', colour: '#f00', dashed: false },
      { label: 'run b', colour: '#00f', dashed: true },
    ],
    layout: columnLayout([true, false], true),
    smoothed: true,
    log: false,
    format: 'number',
    width: 400,
    height: 200,
    theme: { text: '#333', grid: '#ddd' },
    ...overrides,
  };
}

describe('buildPlotOptions', () => {
  it('has one uPlot series per column, the band filling between its edges', () => {
    const options = buildPlotOptions(shape(), callbacks);
    expect(options.series).toHaveLength(1 + 6);
    expect(options.bands).toEqual([expect.objectContaining({ series: [2, 1] })]);
  });

  it('draws raw lines faint behind smoothed ones', () => {
    const options = buildPlotOptions(shape(), callbacks);
    const [, , , raw, smooth] = options.series;
    expect(raw.alpha).toBe(RAW_ALPHA);
    expect(smooth.alpha).toBe(1);
    expect(raw.stroke).toBe(smooth.stroke);
    expect(options.series[6].dash).toBeDefined();
    expect(options.series[5].dash).toBeUndefined();
  });

  it('shows points of a sparse series through the filter only on the main line', () => {
    const options = buildPlotOptions(shape(), callbacks);
    const smoothPoints = options.series[4].points!;
    expect(typeof smoothPoints.filter).toBe('function');
    const filter = smoothPoints.filter as (u: unknown, i: number, show: boolean) => number[] | null;
    expect(filter(null, 4, false)).toEqual([3]);
    expect(options.series[3].points!.show).toBe(false);
  });

  it('uses a log distribution when asked and integer steps on x', () => {
    expect(buildPlotOptions(shape({ log: true }), callbacks).scales!.y.distr).toBe(3);
    const options = buildPlotOptions(shape(), callbacks);
    expect(options.scales!.y.distr).toBe(1);
    const incrs = options.axes![0].incrs as number[];
    for (const incr of incrs) expect(Number.isInteger(incr)).toBe(true);
  });

  it('gives the y scale a fixed domain when there is one, a nice range otherwise', () => {
    const fixed = buildPlotOptions(shape({ yDomain: [0, 1] }), callbacks).scales!.y.range as (u: unknown, min: number, max: number) => [number, number];
    expect(fixed(null, 0.2, 0.3)).toEqual([0, 1]);
    const fitted = buildPlotOptions(shape(), callbacks).scales!.y.range as (u: unknown, min: number, max: number) => [number, number];
    expect(fitted(null, 0, 0)).toEqual([0, 1]);
  });

  it('syncs the crosshair but not the drag events (zoom syncs on its own)', () => {
    const options = buildPlotOptions(shape({ syncKey: 'run:1' }), callbacks);
    const pub = options.cursor!.sync!.filters!.pub!;
    expect(options.cursor!.sync!.key).toBe('run:1');
    expect(pub('mousemove', null as never, 0, 0, 0, 0, 0)).toBe(true);
    expect(pub('mouseup', null as never, 0, 0, 0, 0, 0)).toBe(false);
    expect(buildPlotOptions(shape(), callbacks).cursor!.sync).toBeUndefined();
  });

  it('formats y ticks by the chart format', () => {
    const options = buildPlotOptions(shape({ format: 'percent' }), callbacks);
    const values = options.axes![1].values as (u: unknown, splits: number[]) => string[];
    expect(values(null, [0, 0.5, 1])).toEqual(['0%', '50%', '100%']);
    expect(yAxisWidth(['0%', '100%'])).toBeGreaterThanOrEqual(40);
  });
});

describe('x range', () => {
  it('widens a lone step by one either side, and keeps a zoom as asked', () => {
    const range = buildPlotOptions(shape(), callbacks).scales!.x.range as (u: unknown, min: number, max: number) => [number, number];
    expect(range({ data: [[5]] }, 0, 10)).toEqual([4, 6]);
    expect(range({ data: [[1, 2, 3, 40]] }, 2.5, 17.25)).toEqual([2.5, 17.25]);
  });
});

describe('yTickLabels', () => {
  it('leaves the log ticks uPlot does not label blank', () => {
    expect(yTickLabels([0.1, null, 0.3, null, 1], 'number', true)).toEqual(['0.1', '', '0.3', '', '1']);
  });
});
