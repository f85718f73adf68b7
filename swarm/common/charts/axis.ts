/**
 * Axis ranges and ticks that stay sane on awkward data: a constant series, a single point, all zeros, rates.
 * Rules: the y range never reaches below 0 (or above 0) unless the data does; a rate shown as a percent stays
 * within [0, 1] unless the data leaves it; the x axis (training steps) has integer ticks only.
 */
import type { ChartFormat } from './format.ts';

/** About this many y ticks: enough to read a value, few enough for a 180 px panel. */
export const Y_TICK_TARGET = 5;
/** About this many x ticks. */
export const X_TICK_TARGET = 6;
/** Room left above and below the data, as a share of its span, so lines do not touch the frame. */
const PAD_FRACTION = 0.05;
/** A constant series gets ± this share of its value, so a flat line sits mid-panel at a readable scale. */
const CONSTANT_PAD_FRACTION = 0.1;
/** A span this small against the values is float noise: the data is constant. */
const FLAT_RELATIVE_SPAN = 1e-9;

export interface YRangeOptions {
  format?: ChartFormat;
  /** A fixed range (e.g. [0, 1] for rates): used as given, except a log scale ignores a bound ≤ 0. */
  domain?: readonly [number, number] | null;
  log?: boolean;
}

/** The y range for data spanning [min, max] (null: no data). */
export function niceYRange(min: number | null, max: number | null, options: YRangeOptions = {}): [number, number] {
  if (options.log) return logRange(min, max, options.domain);
  if (options.domain) return [options.domain[0], options.domain[1]];
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  if (max < min) [min, max] = [max, min];
  const magnitude = Math.max(Math.abs(min), Math.abs(max));
  const flat = max - min <= magnitude * FLAT_RELATIVE_SPAN;
  const unitRate = options.format === 'percent' && min >= 0 && max <= 1;
  if (flat && (magnitude === 0 || unitRate)) return [0, 1];

  const pad = flat ? magnitude * CONSTANT_PAD_FRACTION : (max - min) * PAD_FRACTION;
  let lo = min - pad;
  let hi = max + pad;
  const step = niceStep(hi - lo, Y_TICK_TARGET);
  lo = roundTo(Math.floor(lo / step) * step, step);
  hi = roundTo(Math.ceil(hi / step) * step, step);
  // Padding and rounding must not invent a region the data never visits (a loss below 0, a rate above 100%).
  if (min >= 0) lo = Math.max(lo, 0);
  if (max <= 0) hi = Math.min(hi, 0);
  if (unitRate) hi = Math.min(hi, 1);
  return [lo, hi];
}

/** Whole decades around [min, max] (all > 0) for a log axis; one decade when there is nothing to span. */
export function logRange(min: number | null, max: number | null, domain?: readonly [number, number] | null): [number, number] {
  if (domain && domain[0] > 0 && domain[1] > domain[0]) return [domain[0], domain[1]];
  if (min === null || max === null || !(min > 0) || !(max > 0)) return [1, 10];
  const lo = 10 ** Math.floor(Math.log10(min));
  let hi = 10 ** Math.ceil(Math.log10(max));
  if (hi <= lo) hi = lo * 10;
  return [lo, hi];
}

/** The x (step) range: the data's own, widened by one step each side when it is a single step. */
export function integerXRange(min: number | null, max: number | null): [number, number] {
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  if (max > min) return [min, max];
  // A lone step: centre it, but do not show negative steps for a run that starts at 0.
  return [min >= 0 ? Math.max(0, min - 1) : min - 1, max + 1];
}

/** 1, 2 or 5 × 10^k: the smallest such step giving at most about `count` intervals over `span`. */
export function niceStep(span: number, count: number): number {
  if (!(span > 0) || !Number.isFinite(span)) return 1;
  const raw = span / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  return 10 * magnitude;
}

/** Ticks at multiples of a nice step within [min, max]. */
export function niceTicks(min: number, max: number, count = Y_TICK_TARGET): number[] {
  if (!(max > min)) return [min];
  return ticksWithStep(min, max, niceStep(max - min, count));
}

/** Integer ticks (steps): the step is a nice whole number, at least 1, so there is never a "2.5". */
export function integerTicks(min: number, max: number, count = X_TICK_TARGET): number[] {
  if (!(max > min)) return [Math.round(min)];
  return ticksWithStep(min, max, Math.max(1, Math.round(niceStep(max - min, count))));
}

/** Integer increments for uPlot's x axis (`axes[0].incrs`): it picks the first that leaves room between labels. */
export const INTEGER_INCREMENTS: readonly number[] = (() => {
  const out: number[] = [];
  for (let magnitude = 1; magnitude <= 1e9; magnitude *= 10) out.push(magnitude, 2 * magnitude, 5 * magnitude);
  return out;
})();

function ticksWithStep(min: number, max: number, step: number): number[] {
  const out: number[] = [];
  const first = Math.ceil(min / step - 1e-9);
  for (let k = first; k * step <= max + step * 1e-9; k++) out.push(roundTo(k * step, step));
  return out;
}

/** `value` without the float noise a multiple of `step` picks up (0.30000000000000004 → 0.3). */
function roundTo(value: number, step: number): number {
  const decimals = Math.max(0, Math.ceil(-Math.log10(step)) + 2);
  return Number(value.toFixed(Math.min(decimals, 20)));
}
