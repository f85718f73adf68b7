/**
 * What "Download SVG" saves: the same series and markers as the panel, through the report's SVG chart
 * (swarm/common/charts/svg-chart.ts), smoothed as drawn with the raw line faint behind. DOM-free.
 */
import { emaSmooth } from '../../../../swarm/common/charts/ema.ts';
import { lineChartSvg, type Series } from '../../../../swarm/common/charts/svg-chart.ts';
import type { ChartFormat, ChartMarker, ChartSeries } from './chart-types.ts';
import { markerStyle } from './markers.ts';

/** The raw line's opacity behind a smoothed one, as on screen. */
const RAW_OPACITY = 0.25;
/** Width of a downloaded SVG in px: a readable figure in a document. */
const SVG_WIDTH = 720;
const SVG_HEIGHT = 340;
/** File names keep at most this many characters of the title. */
const MAX_NAME_CHARS = 60;

export interface ExportInput {
  title: string;
  series: readonly ChartSeries[];
  markers?: readonly ChartMarker[];
  format?: ChartFormat;
  yDomain?: [number, number];
  smoothing: number;
}

/** The panel as a standalone SVG; `resolve` turns a CSS variable into a colour. */
export function runChartSvg(input: ExportInput, resolve: (colour: string) => string): string {
  const smoothed = input.smoothing > 0;
  const series: Series[] = [];
  for (const s of input.series) {
    const colour = resolve(s.colour);
    const points = (values: readonly (number | null)[]) => pairs(s.x, values).map(([x, y]) => ({ x, y }));
    const band = s.band ? bandPoints(s.x, s.band, smoothed ? input.smoothing : 0) : undefined;
    if (smoothed) series.push({ name: s.label, points: points(s.y), colour, opacity: RAW_OPACITY, legend: false });
    series.push({ name: s.label, points: points(smoothed ? emaSmooth(s.y, input.smoothing) : s.y), colour, dashed: s.dashed, band });
  }
  return lineChartSvg(series, {
    title: input.title,
    xLabel: 'step',
    yLabel: '',
    width: SVG_WIDTH,
    height: SVG_HEIGHT,
    yDomain: input.yDomain,
    format: input.format,
    events: (input.markers ?? []).map((m) => {
      const style = markerStyle(m.kind);
      return { x: m.x, label: `${style.glyph} ${m.label}`, colour: resolve(style.colour) };
    }),
  });
}

/** A file name from a chart title: `Reward mean (train)` → `reward-mean-train.png`. */
export function chartFileName(title: string, extension: string): string {
  const slug = title
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, MAX_NAME_CHARS)
    .replace(/-+$/, '');
  return `${slug || 'chart'}.${extension}`;
}

/** The band as drawn (smoothed like its line), at the steps where both edges have a value. */
function bandPoints(xs: readonly number[], band: NonNullable<ChartSeries['band']>, smoothing: number): { x: number; low: number; high: number }[] {
  const lower = smoothing > 0 ? emaSmooth(band.lower, smoothing) : band.lower;
  const upper = smoothing > 0 ? emaSmooth(band.upper, smoothing) : band.upper;
  const out: { x: number; low: number; high: number }[] = [];
  const n = Math.min(xs.length, lower.length, upper.length);
  for (let i = 0; i < n; i++) {
    const low = lower[i];
    const high = upper[i];
    if (low !== null && high !== null && Number.isFinite(low) && Number.isFinite(high)) out.push({ x: xs[i], low, high });
  }
  return out;
}

/** (x, y) pairs where both are finite. */
function pairs(xs: readonly number[], ys: readonly (number | null)[]): [number, number][] {
  const out: [number, number][] = [];
  const n = Math.min(xs.length, ys.length);
  for (let i = 0; i < n; i++) {
    const y = ys[i];
    if (y !== null && Number.isFinite(y) && Number.isFinite(xs[i])) out.push([xs[i], y]);
  }
  return out;
}
