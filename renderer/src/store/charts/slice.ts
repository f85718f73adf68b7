/**
 * Chart settings shared by every panel on a page: the smoothing weight (one slider, as in W&B), which panels
 * draw a log y axis, and which panel is open full screen. Panels are named by a page-unique id (RunChart's
 * `panelId`, by default its testId or title). Smoothing changes only what is drawn, never the data.
 */
import type { StateCreator } from 'zustand';
import { clampSmoothing } from '../../../../swarm/common/charts/ema.ts';
import type { AppStore } from '../types.ts';

/** W&B's default: visibly smooth on noisy RL curves, still close to the raw values. */
export const DEFAULT_SMOOTHING = 0.6;

export interface ChartsState {
  /** EMA weight in [0, 0.99]; 0 draws the raw values. */
  smoothing: number;
  /** Panel ids showing a log y axis. */
  logScale: readonly string[];
  /** The panel shown large in an overlay, if any. */
  fullScreen: string | null;
}

export interface ChartsActions {
  setChartSmoothing(weight: number): void;
  setChartLogScale(panelId: string, on: boolean): void;
  /** Opens `panelId` full screen; null closes the overlay. */
  showChartFullScreen(panelId: string | null): void;
}

export type ChartsSlice = { charts: ChartsState } & ChartsActions;

export const initialChartsState: ChartsState = { smoothing: DEFAULT_SMOOTHING, logScale: [], fullScreen: null };

export const createChartsSlice: StateCreator<AppStore, [], [], ChartsSlice> = (set) => ({
  charts: initialChartsState,
  setChartSmoothing: (weight) => set((s) => ({ charts: { ...s.charts, smoothing: roundSmoothing(clampSmoothing(weight)) } })),
  setChartLogScale: (panelId, on) =>
    set((s) => {
      const has = s.charts.logScale.includes(panelId);
      if (has === on) return s;
      const logScale = on ? [...s.charts.logScale, panelId] : s.charts.logScale.filter((id) => id !== panelId);
      return { charts: { ...s.charts, logScale } };
    }),
  showChartFullScreen: (panelId) => set((s) => ({ charts: { ...s.charts, fullScreen: panelId } })),
});

/** Two decimals, the slider's resolution: keeps `data-smoothing` and memo keys free of float noise. */
function roundSmoothing(weight: number): number {
  return Math.round(weight * 100) / 100;
}
