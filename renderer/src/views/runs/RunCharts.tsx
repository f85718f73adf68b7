/**
 * The training panels (panels.ts) drawn with the shared chart: one toolbar (smoothing) per page, every panel on
 * one sync key, so hovering or zooming one moves them all. Used by the run page, the comparison and Models.
 */
import { ChartToolbar, RunChart } from '../charts/RunChart.tsx';
import type { PanelSpec } from './panels.ts';

const panelTestId = (panel: PanelSpec) => `chart-${panel.id}`;

export function RunCharts({ panels, version, syncKey, testId }: { panels: readonly PanelSpec[]; version: number; syncKey: string; testId?: string }) {
  const logScalePanels = panels.filter((p) => p.logScaleAllowed).map(panelTestId);
  return (
    <div className="run-charts" data-testid={testId}>
      <ChartToolbar logScalePanels={logScalePanels} />
      <div className="charts">
        {panels.map((panel) => (
          <RunChart
            key={panel.id}
            title={panel.title}
            series={panel.series}
            markers={panel.markers}
            format={panel.format}
            yDomain={panel.yDomain}
            logScaleAllowed={panel.logScaleAllowed}
            off={panel.off}
            syncKey={syncKey}
            version={version}
            testId={panelTestId(panel)}
          />
        ))}
      </div>
    </div>
  );
}
