/** The props contract of RunChart (re-exported by RunChart.tsx), kept DOM-free so pure helpers can use it. */
import type { ChartFormat } from '../../../../swarm/common/charts/format.ts';

export type { ChartFormat };

export interface ChartSeries {
  /** Stable id, e.g. a run id or 'mean'. */
  key: string;
  /** Legend text. */
  label: string;
  /** Integer steps, ascending. */
  x: readonly number[];
  y: readonly (number | null)[];
  /** A CSS variable name like '--accent', or a colour. */
  colour: string;
  dashed?: boolean;
  /** A shaded band, e.g. mean ± std; never drawn beyond an explicit yDomain. */
  band?: { lower: readonly (number | null)[]; upper: readonly (number | null)[] };
}

export type ChartMarkerKind = 'start' | 'resume' | 'config-change' | 'checkpoint' | 'hot-swap' | 'revert' | 'stop' | 'finish' | 'fail';

/** An event at one step, drawn as a thin vertical line with a small glyph. `kind` is one of ChartMarkerKind. */
export interface ChartMarker {
  x: number;
  kind: string;
  label: string;
}

export interface RunChartProps {
  title: string;
  /** 1 (one run) to 8 (compare) series; their x arrays may differ (they are aligned on the union of steps). */
  series: readonly ChartSeries[];
  markers?: readonly ChartMarker[];
  format?: ChartFormat;
  /** A fixed y range, e.g. [0, 1] for rates. */
  yDomain?: [number, number];
  /** Shows the log-scale toggle (disabled, with the reason as its title, unless every value is > 0). */
  logScaleAllowed?: boolean;
  /** When set, the panel says "off" with this reason instead of plotting. */
  off?: string | null;
  /** Crosshair and x-zoom sync group across panels. */
  syncKey?: string;
  /** Changes whenever the data (series values or markers) changes. */
  version: number;
  testId?: string;
  /** Names the panel in the chart settings (log scale, full screen); page-unique. Default: testId, else title. */
  panelId?: string;
  /** Plot height in CSS pixels (default PANEL_HEIGHT). */
  height?: number;
}
