/**
 * A study's curves with the shared chart: per arm, the mean over seeds with its band, of the rollout reward per
 * step and of held-out success per eval step. One toolbar (smoothing), both panels on one sync key.
 */
import type { StudyAnalysis } from '../../../../swarm/common/research-api.ts';
import { ChartToolbar, compareColour, RunChart } from '../charts/RunChart.tsx';
import { bandSeries } from './bands.ts';

/** A new number per analysis object: the chart redraws when a refetch brings a new analysis, not on other renders. */
const versions = new WeakMap<StudyAnalysis, number>();
let nextVersion = 1;
function versionOf(analysis: StudyAnalysis): number {
  let version = versions.get(analysis);
  if (version === undefined) versions.set(analysis, (version = nextVersion++));
  return version;
}

export function StudyCharts({ id, analysis }: { id: string; analysis: StudyAnalysis }) {
  const reward = bandSeries(analysis, 'rewardBand', compareColour);
  const evals = bandSeries(analysis, 'evalBand', compareColour);
  const version = versionOf(analysis);
  return (
    <div className="run-charts" data-testid="study-charts">
      <ChartToolbar />
      <div className="charts">
        <RunChart
          title="Rollout reward (mean over seeds, band)"
          series={reward}
          format="number"
          off={reward.length === 0 ? 'No run has a step yet' : null}
          syncKey={`study:${id}`}
          version={version}
          testId="study-chart-reward"
        />
        <RunChart
          title="Held-out success (mean over seeds, band)"
          series={evals}
          format="percent"
          yDomain={[0, 1]}
          off={evals.length === 0 ? 'No held-out evaluation yet' : null}
          syncKey={`study:${id}`}
          version={version}
          testId="study-chart-eval"
        />
      </div>
    </div>
  );
}
