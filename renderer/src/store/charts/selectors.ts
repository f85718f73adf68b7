import type { ChartsState } from './slice.ts';

function isLogScale(charts: ChartsState, panelId: string): boolean {
  return charts.logScale.includes(panelId);
}

function isFullScreen(charts: ChartsState, panelId: string): boolean {
  return charts.fullScreen === panelId;
}

export const chartsSelectors = { isLogScale, isFullScreen };
