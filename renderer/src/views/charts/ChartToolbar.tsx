/**
 * The page's chart settings, placed once per page above its panels: the smoothing slider every RunChart on the
 * page follows (0 = raw). Optionally a "log y" switch for a set of panels at once (`logScalePanels`).
 */
import type { JSX } from 'react';
import { MAX_SMOOTHING } from '../../../../swarm/common/charts/ema.ts';
import { useAppStore } from '../../store/index.ts';
import './charts.css';

/** The slider's resolution: W&B's, fine enough to tune, coarse enough that every value reads at two decimals. */
const SMOOTHING_STEP = 0.01;

export interface ChartToolbarProps {
  /** Panel ids (RunChart's panelId / testId / title) a "log y (all)" switch turns on and off together; none: no switch. */
  logScalePanels?: readonly string[];
  testId?: string;
}

export function ChartToolbar({ logScalePanels, testId }: ChartToolbarProps): JSX.Element {
  const smoothing = useAppStore((s) => s.charts.smoothing);
  const setSmoothing = useAppStore((s) => s.setChartSmoothing);
  const logScale = useAppStore((s) => s.charts.logScale);
  const setLogScale = useAppStore((s) => s.setChartLogScale);
  const allLog = Boolean(logScalePanels?.length) && logScalePanels!.every((id) => logScale.includes(id));
  return (
    <div className="chart-toolbar" data-testid={testId} role="group" aria-label="Chart settings">
      <label className="chart-toolbar__smoothing">
        <span>Smoothing</span>
        <input
          type="range"
          min={0}
          max={MAX_SMOOTHING}
          step={SMOOTHING_STEP}
          value={smoothing}
          aria-label="Smoothing"
          aria-valuetext={smoothing === 0 ? 'off' : smoothing.toFixed(2)}
          data-testid="smoothing-slider"
          onChange={(event) => setSmoothing(Number(event.currentTarget.value))}
        />
        <output className="chart-toolbar__value" data-testid="smoothing-value">
          {smoothing === 0 ? 'off' : smoothing.toFixed(2)}
        </output>
      </label>
      {logScalePanels?.length ? (
        <label className="chart-toolbar__log">
          <input
            type="checkbox"
            checked={allLog}
            aria-label="Log scale on all panels that allow it"
            onChange={(event) => {
              const on = event.currentTarget.checked;
              for (const id of logScalePanels) setLogScale(id, on);
            }}
          />
          <span>log y</span>
        </label>
      ) : null}
    </div>
  );
}
