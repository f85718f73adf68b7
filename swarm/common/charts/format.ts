/**
 * How chart values read: in a tooltip/legend (`formatValue`, one value, a few significant digits) and on an axis
 * (`tickLabels`, all ticks with the same number of decimals, as few as the tick step needs). Locale-independent so
 * screenshots and tests are stable.
 */

export type ChartFormat = 'number' | 'percent' | 'compact' | 'ratio' | 'ms';

/** What a missing value shows. */
export const MISSING = '—';
/** Significant digits of a value in the legend: enough to compare runs, few enough to read. */
const VALUE_DIGITS = 4;
/** Beyond these, plain numbers switch to exponent notation (tiny KLs, huge counts). */
const EXPONENT_BELOW = 1e-3;
const EXPONENT_FROM = 1e7;
/** The most decimals a tick label gets: past this the step is float noise, not a real step. */
const MAX_TICK_DECIMALS = 6;

const COMPACT_UNITS: readonly [number, string][] = [
  [1e12, 'T'],
  [1e9, 'B'],
  [1e6, 'M'],
  [1e3, 'k'],
];
const TIME_UNITS: readonly [number, string][] = [
  [3_600_000, 'h'],
  [60_000, 'min'],
  [1_000, 's'],
  [1, 'ms'],
];

/** One value for the legend or tooltip. */
export function formatValue(value: number | null | undefined, format: ChartFormat = 'number'): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return MISSING;
  switch (format) {
    case 'percent':
      return `${significant(value * 100, 3)}%`;
    case 'compact':
      return compact(value);
    case 'ratio':
      return `${plainNumber(value)}×`;
    case 'ms': {
      const [unit, suffix] = unitFor(Math.abs(value), TIME_UNITS);
      return `${significant(value / unit, 3)} ${suffix}`;
    }
    default:
      return plainNumber(value);
  }
}

/** Labels for axis ticks: one number of decimals for all, from the step between ticks (so never `.0000%`). */
export function tickLabels(values: readonly number[], format: ChartFormat = 'number', options: { log?: boolean } = {}): string[] {
  if (options.log) return values.map((v) => formatValue(v, format));
  const step = smallestStep(values);
  const maxAbs = values.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  switch (format) {
    case 'percent': {
      const d = decimalsFor(step * 100);
      return values.map((v) => `${fixed(v * 100, d)}%`);
    }
    case 'ratio': {
      const d = decimalsFor(step);
      return values.map((v) => `${fixed(v, d)}×`);
    }
    case 'ms': {
      const [unit, suffix] = unitFor(maxAbs, TIME_UNITS);
      const d = decimalsFor(step / unit);
      return values.map((v) => `${fixed(v / unit, d)} ${suffix}`);
    }
    case 'compact': {
      const [unit, suffix] = maxAbs >= 1e3 ? unitFor(maxAbs, COMPACT_UNITS) : [1, ''];
      const d = decimalsFor(step / unit);
      return values.map((v) => `${fixed(v / unit, d)}${v === 0 ? '' : suffix}`);
    }
    default: {
      if (maxAbs >= EXPONENT_FROM) return tickLabels(values, 'compact');
      if (maxAbs > 0 && maxAbs < EXPONENT_BELOW) return values.map((v) => (v === 0 ? '0' : v.toExponential(1)));
      const d = decimalsFor(step);
      return values.map((v) => fixed(v, d));
    }
  }
}

/** A training step on the x axis: an integer, compact once it is long (`12.5k`). */
export function formatStep(step: number): string {
  if (Math.abs(step) >= 1e4) return compact(step);
  return String(Math.round(step));
}

function plainNumber(value: number): string {
  const a = Math.abs(value);
  if (a === 0) return '0';
  if (a < EXPONENT_BELOW || a >= EXPONENT_FROM) return value.toExponential(2);
  if (a >= 10 ** VALUE_DIGITS) return String(Math.round(value));
  return significant(value, VALUE_DIGITS);
}

function compact(value: number): string {
  const a = Math.abs(value);
  if (a < 1e3) return plainNumber(value);
  const [unit, suffix] = unitFor(a, COMPACT_UNITS);
  return `${significant(value / unit, 3)}${suffix}`;
}

/** `digits` significant digits, trailing zeros dropped, never exponent notation for |v| < 1e21. */
function significant(value: number, digits: number): string {
  if (value === 0) return '0';
  const a = Math.abs(value);
  const decimals = Math.max(0, digits - 1 - Math.floor(Math.log10(a)));
  return stripZeros(fixed(value, Math.min(decimals, 20)));
}

function fixed(value: number, decimals: number): string {
  const text = value.toFixed(decimals);
  // −0.00 reads as a value below zero; it is zero.
  return Number(text) === 0 ? (0).toFixed(decimals) : text;
}

function stripZeros(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

function unitFor(abs: number, units: readonly [number, string][]): [number, string] {
  return units.find(([size]) => abs >= size) ?? units[units.length - 1];
}

/** The smallest gap between consecutive ticks (the step); 1 when there is only one tick. */
function smallestStep(values: readonly number[]): number {
  let step = Infinity;
  for (let i = 1; i < values.length; i++) {
    const gap = Math.abs(values[i] - values[i - 1]);
    if (gap > 0) step = Math.min(step, gap);
  }
  if (Number.isFinite(step)) return step;
  // One tick: as many decimals as the value itself needs.
  const only = Math.abs(values[0] ?? 0);
  return only > 0 && only < 1 ? 10 ** Math.floor(Math.log10(only)) : 1;
}

/** The fewest decimals that write `step` exactly (0.25 → 2, 5 → 0), up to MAX_TICK_DECIMALS. */
export function decimalsFor(step: number): number {
  for (let d = 0; d < MAX_TICK_DECIMALS; d++) {
    const scaled = step * 10 ** d;
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) return d;
  }
  return MAX_TICK_DECIMALS;
}
