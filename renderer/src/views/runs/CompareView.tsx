/**
 * 2–8 runs overlaid: one series per run on every panel (colours from the chart palette, named in the legend), and
 * the configuration of all of them side by side, every key, the ones whose values differ highlighted.
 */
import { useMemo, useState } from 'react';
import { MAX_COMPARED_RUNS, type RunDetail } from '../../../../swarm/common/runs-api.ts';
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { apiRequest } from '../../api/page-client.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { configDiffRows } from '../../store/runs/config.ts';
import { loadComparison } from '../../store/runs/loaders.ts';
import { runPath } from '../../store/runs/route.ts';
import { MIN_COMPARED_RUNS, runsSelectors } from '../../store/runs/selectors.ts';
import { compareColour } from '../charts/RunChart.tsx';
import { formatReward } from '../episodes/format.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { RunCharts } from './RunCharts.tsx';
import { RunStatusBadge } from './RunStatusBadge.tsx';
import { useRunPanels } from './use-run-panels.ts';

/** A palette entry (a CSS variable name such as `--chart-1`) as a CSS value. */
function cssValue(colour: string): string {
  return colour.startsWith('--') ? `var(${colour})` : colour;
}

/** How often live runs are refetched while the event stream is down. */
const FALLBACK_POLL_MS = 5_000;

export function CompareView({ ids }: { ids: readonly string[] }) {
  const runs = useAppStore((s) => s.runs);
  const details = runsSelectors.details(runs, ids);
  const error = runs.comparison?.ids === ids.join(',') ? runs.comparison.error : null;
  const differing = runsSelectors.differingKeys(runs, ids);
  // While any run is live, each step of its model (`train-step`) and each change of it (a `run` event merges into
  // its detail) fetches what is new; settled runs are loaded once.
  const liveModels = details ? details.filter(runsSelectors.isLive).map((d) => d.model) : [];
  const stepsSeen = useAppStore((s) => liveModels.map((m) => s.models.byModel[m]?.lastPushedStep ?? null).join(','));
  const trigger = liveModels.length > 0 ? `${details!.filter(runsSelectors.isLive).map((d) => `${d.id}:${d.lastStep}:${d.status}`).join('|')}|${stepsSeen}` : 'settled';
  useLiveRefresh(() => void loadComparison(appStore, apiRequest(), ids), trigger, {
    fallbackMs: FALLBACK_POLL_MS,
    enabled: ids.length >= MIN_COMPARED_RUNS && ids.length <= MAX_COMPARED_RUNS,
  });

  if (ids.length < MIN_COMPARED_RUNS || ids.length > MAX_COMPARED_RUNS) {
    return (
      <p className="alert" role="alert">
        A comparison shows {MIN_COMPARED_RUNS} to {MAX_COMPARED_RUNS} runs; this address names {ids.length}. <a href="#/runs">Pick runs in the list.</a>
      </p>
    );
  }
  return (
    <div className="stack runs-view" data-testid="compare-view">
      <p>
        <a href="#/runs" className="back-link">
          ← All runs
        </a>
      </p>
      {error && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}
      <CompareLegend ids={ids} details={details} />
      <CompareCharts ids={ids} />
      {details && <ConfigDiff details={details} differingKeys={differing ?? []} />}
    </div>
  );
}

function CompareLegend({ ids, details }: { ids: readonly string[]; details: RunDetail[] | null }) {
  return (
    <Panel title="Runs compared" aside={<span className="count">{ids.length}</span>}>
      <ul className="compare-legend" data-testid="compare-legend">
        {ids.map((id, i) => {
          const run = details?.[i];
          return (
            <li key={id} className="compare-legend__item" data-run-id={id}>
              <span className="compare-legend__swatch" style={{ background: cssValue(compareColour(i)) }} aria-hidden="true" />
              <a href={`#/runs/${runPath(id)}`}>{run?.name ?? id}</a>
              {run && (
                <>
                  <RunStatusBadge status={run.status} />
                  <span className="muted small mono">
                    {formatCount(run.steps)} steps · best {formatReward(run.bestReward)} · seed {run.seed} · {run.configHash}
                  </span>
                </>
              )}
            </li>
          );
        })}
      </ul>
    </Panel>
  );
}

function CompareCharts({ ids }: { ids: readonly string[] }) {
  const { panels, version, steps } = useRunPanels(ids);
  return (
    <Panel title="Training curves" testId="compare-charts" aside={<span className="count">{formatCount(steps)} steps</span>}>
      <RunCharts panels={panels} version={version} syncKey={`compare:${ids.join(',')}`} />
    </Panel>
  );
}

function ConfigDiff({ details, differingKeys }: { details: RunDetail[]; differingKeys: readonly string[] }) {
  const [onlyDiffering, setOnlyDiffering] = useState(false);
  const rows = useMemo(() => configDiffRows(details.map((d) => d.config), differingKeys), [details, differingKeys]);
  const shown = onlyDiffering ? rows.filter((r) => r.differs) : rows;
  const differs = rows.filter((r) => r.differs).length;
  return (
    <Panel title="Configuration" aside={<span className="count">{differs} differ</span>}>
      <label className="compare-filter">
        <input type="checkbox" checked={onlyDiffering} onChange={(e) => setOnlyDiffering(e.target.checked)} /> Only the keys that differ
      </label>
      <div className="table-wrap">
        <table className="table config-table" data-testid="compare-config">
          <thead>
            <tr>
              <th scope="col">Key</th>
              {details.map((d, i) => (
                <th key={d.id} scope="col">
                  <span className="compare-legend__swatch" style={{ background: cssValue(compareColour(i)) }} aria-hidden="true" /> {d.name}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {shown.map((row) => (
              <tr key={row.key} data-key={row.key} data-differs={row.differs ? 'true' : 'false'} className={row.differs ? 'config-row--changed' : undefined}>
                <th scope="row" className="mono">
                  {row.key}
                  {row.differs && <span className="visually-hidden"> (differs)</span>}
                </th>
                {row.values.map((value, i) => (
                  <td key={details[i].id} className="mono">
                    {value}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </Panel>
  );
}
