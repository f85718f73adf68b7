/**
 * One run: what it is (header), why its batches may be thin (warnings), every resolved setting, its curves with
 * its events marked, and its events, checkpoints, scripts, tasks and exports. Live while it runs: a step of its
 * model (`train-step`) or a change of the run (`run` event) fetches what is new.
 */
import type { ReactNode } from 'react';
import type { RunDetail, RunWarning } from '../../../../swarm/common/runs-api.ts';
import { EmptyState } from '../../components/EmptyState.tsx';
import { Fact, Facts, Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { apiRequest } from '../../api/page-client.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { loadRunCurves, loadRunTasks } from '../../store/runs/loaders.ts';
import { runsSelectors } from '../../store/runs/selectors.ts';
import { formatEpisodeTime } from '../episodes/format.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { ConfigTable } from './ConfigTable.tsx';
import { ExportButtons } from './ExportButtons.tsx';
import { formatDurationOrDash, formatStart } from './format.ts';
import { RunCharts } from './RunCharts.tsx';
import { CheckpointsTable, EventsTable, ScriptsTable, TasksTable } from './RunTables.tsx';
import { RunStatusBadge } from './RunStatusBadge.tsx';
import { useNow } from './use-now.ts';
import { useRunPanels } from './use-run-panels.ts';

/** How often a live run is refetched while the event stream is down. */
const FALLBACK_POLL_MS = 3_000;

export function RunPage({ id }: { id: string }) {
  const record = useAppStore((s) => runsSelectors.record(s.runs, id));
  const detail = record.detail;
  useRunLiveRefresh(id, detail);

  if (!detail) {
    return (
      <div className="stack">
        <BackToRuns />
        {record.error ? (
          <p className="alert" role="alert" data-testid="run-error">
            {record.error}
          </p>
        ) : (
          <p className="muted" aria-busy="true">
            Loading the run…
          </p>
        )}
      </div>
    );
  }
  return (
    <div className="stack runs-view" data-testid="run-page" data-run-id={detail.id}>
      <BackToRuns />
      <RunHeader run={detail} />
      <RunWarnings warnings={detail.warnings} testId="run-warning" />
      <RunChartsPanel id={id} />
      <div className="grid grid--two">
        <Panel title="Configuration" aside={<span className="count">{detail.changedFromDefaults.length} changed</span>}>
          <ConfigTable config={detail.config} changedFromDefaults={detail.changedFromDefaults} />
        </Panel>
        <div className="stack">
          <Panel title="Events" aside={<span className="count">{detail.events.length}</span>}>
            <EventsTable events={detail.events} />
          </Panel>
          <Panel title="Export">
            <ExportButtons run={detail} />
          </Panel>
        </div>
      </div>
      <Panel title="Checkpoints" aside={<span className="count">{detail.checkpoints.length}</span>}>
        <CheckpointsTable run={detail} />
      </Panel>
      <Panel title="Scripts" aside={<span className="count">{detail.scripts.length}</span>}>
        <ScriptsTable scripts={detail.scripts} />
      </Panel>
      <Panel title="Tasks" aside={<span className="count">{record.tasks?.length ?? '…'}</span>}>
        <TasksTable tasks={record.tasks} />
      </Panel>
    </div>
  );
}

/**
 * Loads the run on open and on reconnection; while it is live, again whenever its model steps or the run changes
 * (steps come as `?after=` the last one held, so a refetch brings only what is new).
 */
function useRunLiveRefresh(id: string, detail: RunDetail | null) {
  const pushedStep = useAppStore((s) => (detail ? (s.models.byModel[detail.model]?.lastPushedStep ?? null) : null));
  // A settled run (and one not loaded yet) has a constant trigger: it loads on open and on reconnection only.
  const trigger = detail && runsSelectors.isLive(detail) ? `${detail.status}|${detail.lastStep}|${detail.steps}|${detail.events.length}|${pushedStep}` : 'settled';
  useLiveRefresh(
    () => {
      const request = apiRequest();
      void loadRunCurves(appStore, request, id);
      void loadRunTasks(appStore, request, id);
    },
    trigger,
    { fallbackMs: FALLBACK_POLL_MS, enabled: true },
  );
}

function BackToRuns() {
  return (
    <p>
      <a href="#/runs" className="back-link">
        ← All runs
      </a>
    </p>
  );
}

function RunHeader({ run }: { run: RunDetail }) {
  const now = useNow(runsSelectors.isLive(run));
  return (
    <Panel title={`Run ${run.name}`} testId="run-header" aside={<RunStatusBadge status={run.status} />}>
      <div className="grid grid--two">
        <Facts>
          <Fact label="Name" testId="run-name">
            {run.name} <span className="mono muted small">{run.id}</span>
          </Fact>
          <Fact label="Model">{run.model}</Fact>
          <Fact label="Start point" testId="run-start">
            {formatStart(run.start)}
          </Fact>
          <Fact label="Seed">
            <span className="mono">{run.seed}</span>
          </Fact>
          <Fact label="Config hash">
            <span className="mono">{run.configHash}</span>
          </Fact>
        </Facts>
        <Facts>
          <Fact label="Started">{formatEpisodeTime(run.createdAt)}</Fact>
          <Fact label="Ended">{run.endedAt ? formatEpisodeTime(run.endedAt) : '—'}</Fact>
          <Fact label="Duration">{formatDurationOrDash(runsSelectors.durationS(run, now))}</Fact>
          <Fact label="Steps" testId="run-steps">
            {formatCount(run.steps)} <span className="muted small">(last run step {run.lastStep}; model step = run step + {run.stepOffset})</span>
          </Fact>
        </Facts>
      </div>
    </Panel>
  );
}

/** Warnings as alerts: the loop trains, but on too little (mostly discarded groups, checkpoints failing). */
export function RunWarnings({ warnings, testId }: { warnings: readonly RunWarning[]; testId: string }) {
  if (warnings.length === 0) return null;
  return (
    <div className="stack run-warnings">
      {warnings.map((w) => (
        <p key={w.code} className="alert alert--warn" role="alert" data-testid={testId} data-code={w.code}>
          {w.message}
        </p>
      ))}
    </div>
  );
}

function RunChartsPanel({ id }: { id: string }) {
  const { panels, version, steps } = useRunPanels([id]);
  const loaded = useAppStore((s) => runsSelectors.record(s.runs, id).stepsLoaded);
  return (
    <Panel title="Training curves" testId="run-charts" aside={<span className="count">{formatCount(steps)} steps</span>}>
      {loaded && steps === 0 ? <NoStepsYet /> : <RunCharts panels={panels} version={version} syncKey={`run:${id}`} />}
    </Panel>
  );
}

export function NoStepsYet({ children }: { children?: ReactNode }) {
  return (
    <EmptyState icon="runs" title="Curves appear after the first optimizer step">
      <p>A step runs once enough groups of finished train episodes are collected (attach a script in Clients).</p>
      {children}
    </EmptyState>
  );
}
