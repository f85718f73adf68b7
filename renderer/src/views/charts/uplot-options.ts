/**
 * uPlot options for one RunChart shape (which series, bands, smoothing on/off, log axis, format). Built once per
 * shape; data flows through setData afterwards. DOM-free apart from the hover-point elements uPlot asks for, so
 * the shape logic is testable in node.
 */
import type uPlot from 'uplot';
import { INTEGER_INCREMENTS, integerXRange, niceYRange } from '../../../../swarm/common/charts/axis.ts';
import { formatStep, tickLabels, type ChartFormat } from '../../../../swarm/common/charts/format.ts';
import { isMainColumn, type ColumnRole } from './chart-data.ts';

/** Opacity of the raw line behind its smoothed twin: visible as texture, not as a second line. */
export const RAW_ALPHA = 0.22;
/** Band fill strength (mean ± std), as a colour-mix share. */
const BAND_FILL_PERCENT = 16;
/** Line widths in CSS px: the smoothed line a touch bolder than a raw line drawn alone. */
const MAIN_WIDTH = 1.75;
const RAW_ALONE_WIDTH = 1.5;
const RAW_FAINT_WIDTH = 1;
/** Diameter of the dots drawn on sparse series. */
const POINT_SIZE = 5;
/** Minimum CSS px between x tick labels: uPlot picks the first integer increment leaving this much room. */
const X_TICK_SPACE = 64;
const Y_TICK_SPACE = 30;
/** Height of the x axis: one row of tick labels (uPlot's default leaves room for a second). */
const X_AXIS_PX = 30;
/** Y axis width: a CSS px estimate per label character, plus the tick and padding, within bounds. */
const Y_AXIS_CHAR_PX = 7;
const Y_AXIS_MIN_PX = 40;
const Y_AXIS_MAX_PX = 90;
const AXIS_FONT = '11px system-ui, sans-serif';
/** uPlot sync events that start or end a drag (zoom): zoom syncs through zoom-sync.ts, not by replaying drags. */
const UNSYNCED_EVENTS = new Set(['mousedown', 'mouseup', 'dblclick']);

export interface PlotShape {
  /** Per series (props order): its resolved colour and whether it is dashed. */
  series: readonly { label: string; colour: string; dashed: boolean }[];
  layout: readonly ColumnRole[];
  smoothed: boolean;
  log: boolean;
  format: ChartFormat;
  yDomain?: readonly [number, number];
  width: number;
  height: number;
  syncKey?: string;
  theme: { text: string; grid: string };
}

export interface PlotCallbacks {
  /** Whether series `seriesIndex` (props order) draws all its points. */
  showAllPoints(seriesIndex: number): boolean;
  /** Union indexes of the series' isolated points (drawn when not all are). */
  isolatedPoints(seriesIndex: number): number[];
  onCursor(u: uPlot): void;
  onXScale(u: uPlot): void;
  onDraw(u: uPlot): void;
}

export function buildPlotOptions(shape: PlotShape, callbacks: PlotCallbacks): uPlot.Options {
  const { layout, smoothed, format, log } = shape;
  const roleOf = (uPlotIndex: number) => layout[uPlotIndex - 1];
  const isMain = (uPlotIndex: number) => uPlotIndex > 0 && isMainColumn(roleOf(uPlotIndex), smoothed);

  const series: uPlot.Series[] = [{ label: 'step' }];
  const bands: uPlot.Band[] = [];
  layout.forEach((role, i) => {
    const info = shape.series[role.series];
    const common = { label: info.label, scale: 'y', spanGaps: true };
    if (role.kind === 'lower' || role.kind === 'upper') {
      series.push({ ...common, stroke: 'transparent', width: 0, points: { show: false } });
      if (role.kind === 'upper') {
        // uPlot bands fill from the first series down to the second: upper (this one) to lower (the one before).
        bands.push({ series: [i + 1, i], fill: `color-mix(in srgb, ${info.colour} ${BAND_FILL_PERCENT}%, transparent)` });
      }
      return;
    }
    const main = isMainColumn(role, smoothed);
    series.push({
      ...common,
      stroke: info.colour,
      width: main ? (smoothed ? MAIN_WIDTH : RAW_ALONE_WIDTH) : RAW_FAINT_WIDTH,
      alpha: main ? 1 : RAW_ALPHA,
      // Only the main line is dashed: the faint raw twin is texture, and dashing a dense path is the costliest
      // thing a canvas strokes (a dashed 10,000-step raw line costs as much as all the other lines together).
      dash: info.dashed && main ? [5, 4] : undefined,
      points: main
        ? {
            show: () => callbacks.showAllPoints(role.series),
            filter: (_u, _i, show) => (show ? null : nonEmpty(callbacks.isolatedPoints(role.series))),
            size: POINT_SIZE,
            fill: info.colour,
            stroke: info.colour,
          }
        : { show: false },
    });
  });

  const axis = {
    stroke: shape.theme.text,
    grid: { stroke: shape.theme.grid, width: 1 },
    ticks: { stroke: shape.theme.grid, width: 1, size: 4 },
    font: AXIS_FONT,
  };
  const yDomain = shape.yDomain ? ([shape.yDomain[0], shape.yDomain[1]] as const) : null;

  return {
    width: shape.width,
    height: shape.height,
    series,
    bands,
    legend: { show: false },
    padding: [8, 12, 0, 0],
    cursor: {
      drag: { x: true, y: false, setScale: true },
      sync: shape.syncKey ? { key: shape.syncKey, filters: { pub: (type) => !UNSYNCED_EVENTS.has(type) } } : undefined,
      points: {
        // Hover dots on the lines a reader follows only; none on band edges or faint raw lines.
        show: ((_u: uPlot, i: number) => (isMain(i) ? document.createElement('div') : undefined)) as uPlot.Cursor.Points.Show,
        size: POINT_SIZE + 2,
      },
    },
    scales: {
      x: {
        time: false,
        // uPlot widens a lone step to ±5 itself before asking; one step either side reads better.
        range: (u, min, max) => (u.data?.[0]?.length === 1 ? integerXRange(u.data[0][0], u.data[0][0]) : integerXRange(min, max)),
      },
      y: {
        distr: log ? 3 : 1,
        log: 10,
        range: (_u, min, max) => niceYRange(min, max, { format, domain: yDomain, log }),
      },
    },
    axes: [
      { ...axis, incrs: [...INTEGER_INCREMENTS], space: X_TICK_SPACE, size: X_AXIS_PX, values: (_u, splits) => splits.map(formatStep) },
      {
        ...axis,
        space: Y_TICK_SPACE,
        values: (_u, splits) => yTickLabels(splits, format, log),
        size: (_u, values) => yAxisWidth(values),
      },
    ],
    hooks: {
      setCursor: [(u) => callbacks.onCursor(u)],
      setScale: [(u, key) => key === 'x' && callbacks.onXScale(u)],
      draw: [(u) => callbacks.onDraw(u)],
    },
  };
}

/** Y tick labels; uPlot's log axis passes null for the ticks it keeps unlabelled (4, 6, 8, 9 × 10^k). */
export function yTickLabels(splits: readonly (number | null)[], format: ChartFormat, log: boolean): string[] {
  const shown = splits.filter((v): v is number => v !== null && v !== undefined);
  const labels = tickLabels(shown, format, { log });
  let next = 0;
  return splits.map((v) => (v === null || v === undefined ? '' : labels[next++]));
}

/** The y axis width that fits its labels. */
export function yAxisWidth(labels: readonly string[] | null | undefined): number {
  const longest = (labels ?? []).reduce((n, label) => Math.max(n, label.length), 0);
  return Math.min(Y_AXIS_MAX_PX, Math.max(Y_AXIS_MIN_PX, longest * Y_AXIS_CHAR_PX + 14));
}

function nonEmpty(indexes: number[]): number[] | null {
  return indexes.length ? indexes : null;
}
