/**
 * The data side of a RunChart, DOM-free: series with different steps aligned on the union of their steps, the
 * columns uPlot draws (raw, smoothed, band edges) in a fixed layout, and the values the live legend reads.
 * Alignment and smoothing run once per data version (and smoothing weight), never per frame.
 */
import { emaSmooth } from '../../../../swarm/common/charts/ema.ts';
import type { ChartSeries } from './chart-types.ts';

/** A series with at most this many points shows every point (a short run, a sparse eval metric). */
export const SHOW_ALL_POINTS_MAX = 30;
/** The legend looks this many steps either side of the cursor for a series that has no value at its step. */
export const NEAREST_VALUE_WINDOW = 64;

type Column = (number | null)[];

export interface AlignedChart {
  /** The union of all series' steps, ascending, without repeats. */
  x: number[];
  /** Per series, its values at each step of `x` (null where it has none). */
  y: Column[];
  lower: (Column | null)[];
  upper: (Column | null)[];
  /** Per series, how many finite values it has. */
  counts: number[];
  /** Per series, indexes into `x` of points with no neighbour of their own (drawn as dots). */
  isolated: number[][];
  /** Every finite value (bands included) is > 0: a log axis can draw it. */
  allPositive: boolean;
  /** At least one finite value. */
  hasData: boolean;
}

/** Aligns the series on the union of their steps. */
export function alignSeries(series: readonly ChartSeries[]): AlignedChart {
  const x = unionSteps(series);
  const y: Column[] = [];
  const lower: (Column | null)[] = [];
  const upper: (Column | null)[] = [];
  const counts: number[] = [];
  const isolated: number[][] = [];
  let allPositive = true;
  let hasData = false;
  for (const s of series) {
    const place = placer(s.x, x);
    const values = place(s.y);
    y.push(values);
    lower.push(s.band ? place(s.band.lower) : null);
    upper.push(s.band ? place(s.band.upper) : null);
    let count = 0;
    for (const column of [values, lower[lower.length - 1], upper[upper.length - 1]]) {
      for (const v of column ?? []) {
        if (v === null) continue;
        if (column === values) count++;
        if (v <= 0) allPositive = false;
      }
    }
    counts.push(count);
    hasData ||= count > 0;
    isolated.push(isolatedPoints(s, x));
  }
  return { x, y, lower, upper, counts, isolated, allPositive: allPositive && hasData, hasData };
}

/** The first and last step (null: no steps). */
export function stepExtent(aligned: AlignedChart): [number, number] | null {
  return aligned.x.length ? [aligned.x[0], aligned.x[aligned.x.length - 1]] : null;
}

function unionSteps(series: readonly ChartSeries[]): number[] {
  if (series.length === 0) return [];
  const first = series[0].x;
  if (series.every((s) => sameSteps(s.x, first))) return dedupeSorted(first.filter(Number.isFinite));
  const all: number[] = [];
  for (const s of series) for (const v of s.x) if (Number.isFinite(v)) all.push(v);
  return dedupeSorted(all.sort((a, b) => a - b));
}

function sameSteps(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function dedupeSorted(values: readonly number[]): number[] {
  const out: number[] = [];
  for (const v of values) if (out.length === 0 || out[out.length - 1] !== v) out.push(v);
  return out;
}

/** A function putting columns indexed like `own` onto `union`: one merge walk, both ascending. */
function placer(own: readonly number[], union: readonly number[]): (values: readonly (number | null)[]) => Column {
  const at = new Int32Array(own.length).fill(-1);
  let k = 0;
  for (let j = 0; j < own.length; j++) {
    const step = own[j];
    if (!Number.isFinite(step)) continue;
    while (k < union.length && union[k] < step) k++;
    if (union[k] === step) at[j] = k;
  }
  return (values) => {
    const out: Column = new Array(union.length).fill(null);
    const n = Math.min(values.length, at.length);
    for (let j = 0; j < n; j++) {
      const v = values[j];
      if (at[j] >= 0 && v !== null && Number.isFinite(v)) out[at[j]] = v;
    }
    return out;
  };
}

/** Union indexes of a series' points whose own neighbours are missing: a line alone would not show them. */
function isolatedPoints(s: ChartSeries, union: readonly number[]): number[] {
  const has = (j: number) => j >= 0 && j < s.y.length && s.y[j] !== null && Number.isFinite(s.y[j]);
  const out: number[] = [];
  let k = 0;
  for (let j = 0; j < s.x.length; j++) {
    while (k < union.length && union[k] < s.x[j]) k++;
    if (has(j) && !has(j - 1) && !has(j + 1) && union[k] === s.x[j]) out.push(k);
  }
  return out;
}

export type ColumnKind = 'raw' | 'smoothed' | 'lower' | 'upper';
export interface ColumnRole {
  kind: ColumnKind;
  /** The series (index into props.series) the column belongs to. */
  series: number;
}

/**
 * Overlays of more series than this draw their smoothed lines only: faint raw twins of many runs are a tangle to
 * read, and they double what the canvas strokes (8 runs × 10,000 steps on 8 panels must pan at 50 fps).
 */
export const RAW_TWINS_MAX_SERIES = 2;

/**
 * The columns after x, per series: its band's lower and upper edge (if it has a band), its raw line (unless
 * smoothing is on and more than RAW_TWINS_MAX_SERIES series are overlaid), and its smoothed line when smoothing is
 * on. The line a reader follows (smoothed, else raw) is the series' "main" column.
 */
export function columnLayout(bands: readonly boolean[], smoothed: boolean): ColumnRole[] {
  const layout: ColumnRole[] = [];
  const rawTwins = !smoothed || bands.length <= RAW_TWINS_MAX_SERIES;
  bands.forEach((band, series) => {
    if (band) layout.push({ kind: 'lower', series }, { kind: 'upper', series });
    if (rawTwins) layout.push({ kind: 'raw', series });
    if (smoothed) layout.push({ kind: 'smoothed', series });
  });
  return layout;
}

/** Whether `role` is the line drawn solid for its series. */
export function isMainColumn(role: ColumnRole, smoothed: boolean): boolean {
  return role.kind === (smoothed ? 'smoothed' : 'raw');
}

/**
 * The columns to draw, in `layout` order: smoothed lines and bands use the EMA weight; band edges are clamped into
 * an explicit y domain (a band never spills past a fixed axis).
 */
export function plotColumns(aligned: AlignedChart, layout: readonly ColumnRole[], smoothing: number, yDomain?: readonly [number, number]): Column[] {
  return layout.map(({ kind, series }) => {
    if (kind === 'raw') return aligned.y[series];
    if (kind === 'smoothed') return emaSmooth(aligned.y[series], smoothing);
    const edge = (kind === 'lower' ? aligned.lower : aligned.upper)[series] ?? new Array<number | null>(aligned.x.length).fill(null);
    const drawn = smoothing > 0 ? emaSmooth(edge, smoothing) : edge;
    return yDomain ? drawn.map((v) => (v === null ? null : Math.min(yDomain[1], Math.max(yDomain[0], v)))) : drawn;
  });
}

/** `index` if `column` has a value there, else the nearest index within NEAREST_VALUE_WINDOW that has one (-1: none). */
export function nearestIndex(column: readonly (number | null)[], index: number): number {
  if (index < 0 || index >= column.length) return -1;
  for (let d = 0; d <= NEAREST_VALUE_WINDOW; d++) {
    if (index - d >= 0 && column[index - d] !== null) return index - d;
    if (index + d < column.length && column[index + d] !== null) return index + d;
  }
  return -1;
}

/** The index of the last value in `column` (-1: none): what the legend shows when the cursor is away. */
export function lastIndex(column: readonly (number | null)[]): number {
  for (let i = column.length - 1; i >= 0; i--) if (column[i] !== null) return i;
  return -1;
}

/** The finite min and max over the given columns (null: no value). */
export function valueExtent(columns: readonly (readonly (number | null)[])[]): [number, number] | null {
  let min = Infinity;
  let max = -Infinity;
  for (const column of columns) {
    for (const v of column) {
      if (v === null) continue;
      if (v < min) min = v;
      if (v > max) max = v;
    }
  }
  return min <= max ? [min, max] : null;
}
