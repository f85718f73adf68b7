/**
 * Models & training: per hosted model, its engine state, policy version and step; start, pause or stop its
 * training loop; the loop's warnings; live curves of its current run (the shared panels, views/runs/panels.ts) with
 * a link to the run's page, or of the model's steps where the peer records no run; the checkpoints it wrote.
 */
import { useMemo, useState } from 'react';
import type { ModelStatus } from '../../../../swarm/common/api.ts';
import { EmptyState } from '../../components/EmptyState.tsx';
import { Panel } from '../../components/Panel.tsx';
import { EngineStateBadge } from '../../components/StateBadge.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { activitySelectors } from '../../store/activity/selectors.ts';
import { loadSteps, loadTraining, trainingAction } from '../../store/models/loaders.ts';
import { modelsSelectors } from '../../store/models/selectors.ts';
import { COMMANDS } from '../commands.ts';
import { describeError } from '../../api/errors.ts';
import { apiRequest, pageClient } from '../../api/page-client.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { formatEpisodeTime } from '../episodes/format.ts';
import { loadRunCurves, loadRunTasks } from '../../store/runs/loaders.ts';
import { runPath } from '../../store/runs/route.ts';
import { compareColour } from '../charts/RunChart.tsx';
import { buildPanels } from '../runs/panels.ts';
import { RunCharts } from '../runs/RunCharts.tsx';
import { TasksTable } from '../runs/RunTables.tsx';
import { NoStepsYet, RunWarnings } from '../runs/RunPage.tsx';
import { useRunPanels } from '../runs/use-run-panels.ts';
import '../episodes/data-views.css';
import '../runs/runs.css';
import './models.css';

/** How often the training state and steps are refetched while the event stream is down. */
const FALLBACK_POLL_MS = 2_000;

export function ModelsDataView() {
  const models = useAppStore((s) => s.swarm.status?.models);
  const selectedName = useAppStore((s) => s.models.selected);
  const selected = models?.find((m) => m.name === selectedName) ?? models?.[0] ?? null;
  const name = selected?.name ?? null;

  // `train-step` events append steps as they happen (api/connection.ts). No event carries the loop's state (queue,
  // groups, finished or failed, last error): it and any steps missed are refetched on each `train-step` event, on
  // each error logged, and when the model's pushed status moves (modelsSelectors.trainingChangeKey: every step,
  // episode and engine change).
  const statusChange = useAppStore((s) => modelsSelectors.trainingChangeKey(s.swarm.status, name));
  const pushedStep = useAppStore((s) => modelsSelectors.training(s.models, name).lastPushedStep);
  const lastError = useAppStore((s) => activitySelectors.lastErrorSeq(s.activity));
  // The loop's current run: its curves are the charts (a new run, e.g. after a config change, refetches them).
  const runId = useAppStore((s) => modelsSelectors.training(s.models, name).state?.runId ?? null);
  const change = `${statusChange}|${pushedStep}|${lastError}|${runId}`;
  const refresh = () => {
    if (!name) return;
    const request = apiRequest();
    void loadTraining(appStore, request, name);
    void loadSteps(appStore, request, name);
    if (runId) {
      void loadRunCurves(appStore, request, runId);
      void loadRunTasks(appStore, request, runId);
    }
  };
  useLiveRefresh(refresh, change, { enabled: name !== null, fallbackMs: FALLBACK_POLL_MS });

  if (!models || models.length === 0) {
    return (
      <Panel title="Models on this peer">
        <EmptyState icon="models" title="No models yet" command={COMMANDS.serveModel}>
          <p>Each hosted model is listed here with its engine state, policy version and training curves.</p>
        </EmptyState>
      </Panel>
    );
  }
  return (
    <div className="stack models-view">
      <ModelTabs models={models} selected={name} />
      {selected && <TrainingPanel model={selected} />}
      {selected && (runId ? <RunCurves runId={runId} /> : <ModelCurves name={selected.name} />)}
      {selected && runId && <RunTasks runId={runId} />}
      {selected && <Checkpoints name={selected.name} />}
    </div>
  );
}

function ModelTabs({ models, selected }: { models: readonly ModelStatus[]; selected: string | null }) {
  return (
    <div className="model-cards" role="tablist" aria-label="Hosted models">
      {models.map((model) => (
        <button
          key={model.name}
          type="button"
          role="tab"
          aria-selected={model.name === selected}
          className="model-card"
          data-testid="model-card"
          onClick={() => appStore.getState().modelSelected(model.name)}
        >
          <span className="model-card__name">{model.name}</span>
          <EngineStateBadge state={model.engineState} error={model.error} />
          <span className="model-card__facts mono small">
            v{model.policyVersion} · step {formatCount(model.step)} · {model.backend ?? '—'}
            {model.sampler === 'separate' ? ' · separate sampler' : ''}
          </span>
        </button>
      ))}
    </div>
  );
}

function TrainingPanel({ model }: { model: ModelStatus }) {
  const training = useAppStore((s) => modelsSelectors.training(s.models, model.name));
  const state = training.state;
  const act = (action: 'start' | 'pause' | 'stop') =>
    void trainingAction(appStore, apiRequest(), model.name, action);
  const status = state?.status ?? null;
  return (
    <Panel
      title="Training"
      testId="training-panel"
      aside={
        <span
          className="pill"
          data-state={
            status === 'running'
              ? 'rolling'
              : status === 'failed'
                ? 'failed'
                : status === 'paused'
                  ? 'draining'
                  : 'idle'
          }
          data-testid="training-status"
        >
          {status ?? 'unknown'}
        </span>
      }
    >
      <div className="training-row">
        <dl className="training-facts">
          <Fact label="Engine">
            <EngineStateBadge state={model.engineState} error={model.error} />
          </Fact>
          <Fact label="Policy version">v{model.policyVersion}</Fact>
          <Fact label="Step">{formatCount(model.step)}</Fact>
          <Fact label="Queued episodes">{state ? formatCount(state.queuedEpisodes) : '—'}</Fact>
          <Fact label="Complete groups">
            {state ? `${state.completeGroups} / ${state.config.batchTasks}` : '—'}
          </Fact>
          <Fact label="Group size">{state ? state.config.groupSize : '—'}</Fact>
        </dl>
        <div className="row-actions" role="group" aria-label="Training loop">
          <button
            type="button"
            className={`button ${modelsSelectors.startIsNext(state) ? 'button--primary' : ''}`}
            data-testid="training-start"
            disabled={training.busy || !state || status === 'running'}
            onClick={() => act('start')}
          >
            {status === 'paused' ? 'Resume' : 'Start'}
          </button>
          <button
            type="button"
            className="button"
            disabled={training.busy || status !== 'running'}
            onClick={() => act('pause')}
          >
            Pause
          </button>
          <button
            type="button"
            className="button button--danger"
            disabled={training.busy || !state || status === 'stopped'}
            onClick={() => act('stop')}
          >
            Stop
          </button>
        </div>
      </div>
      {state?.runId && (
        <p className="training-run small">
          Run <span className="mono">{state.runId}</span> ·{' '}
          <a href={`#/runs/${runPath(state.runId)}`} data-testid="open-run">
            Open run
          </a>
        </p>
      )}
      <RunWarnings warnings={state?.warnings ?? []} testId="training-warning" />
      {(training.stateError || state?.lastError) && (
        <p className={training.state ? 'alert' : 'muted'} role={training.state ? 'alert' : undefined}>
          {training.stateError ?? state?.lastError}
        </p>
      )}
    </Panel>
  );
}

function Fact({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

/** The current run's curves: the same panels as its run page. */
function RunCurves({ runId }: { runId: string }) {
  const { panels, version, steps } = useRunPanels([runId]);
  const loaded = useAppStore((s) => s.runs.byId[runId]?.stepsLoaded ?? false);
  return (
    <Panel title="Training curves" aside={<span className="count">{formatCount(steps)} steps</span>} testId="training-charts">
      {loaded && steps === 0 ? <NoStepsYet /> : <RunCharts panels={panels} version={version} syncKey={`model-run:${runId}`} />}
    </Panel>
  );
}

/** Per task over the current run, train and held-out apart (the run page shows the same table). */
function RunTasks({ runId }: { runId: string }) {
  const tasks = useAppStore((s) => s.runs.byId[runId]?.tasks ?? null);
  return (
    <Panel title="Tasks of this run" aside={<span className="count">{tasks?.length ?? '…'}</span>} testId="model-run-tasks">
      <TasksTable tasks={tasks} />
    </Panel>
  );
}

/** A peer that records no runs: the same panels over the model's own steps (x = model step). */
function ModelCurves({ name }: { name: string }) {
  const training = useAppStore((s) => modelsSelectors.training(s.models, name));
  const config = training.state?.config ?? null;
  const panels = useMemo(
    () => buildPanels([{ key: name, label: name, colour: compareColour(0), steps: training.steps, config }]),
    [name, training.steps, config],
  );
  return (
    <Panel title="Training curves" aside={<span className="count">{formatCount(training.steps.length)} steps</span>} testId="training-charts">
      {training.steps.length === 0 ? (
        <NoStepsYet />
      ) : (
        <RunCharts panels={panels} version={training.stepsVersion} syncKey={`model:${name}`} />
      )}
    </Panel>
  );
}

function Checkpoints({ name }: { name: string }) {
  const training = useAppStore((s) => modelsSelectors.training(s.models, name));
  const list = modelsSelectors.checkpoints(training.steps);
  const [exporting, setExporting] = useState<number | null>(null);
  const [exportError, setExportError] = useState<string | null>(null);
  const exportCheckpoint = async (step: number) => {
    setExporting(step);
    setExportError(null);
    try {
      const model = encodeURIComponent(name);
      await pageClient().download(`/models/${model}/checkpoints/${step}/archive`, `${name}-step-${step}.tar`);
    } catch (error) {
      setExportError(describeError(error));
    } finally {
      setExporting(null);
    }
  };
  return (
    <Panel title="Checkpoints" aside={<span className="count">{list.length}</span>}>
      {exportError && (
        <p className="alert" role="alert">
          Export failed: {exportError}
        </p>
      )}
      {list.length === 0 ? (
        <p className="muted" data-testid="checkpoints-empty">
          {modelsSelectors.noCheckpointLine(training.state)}
        </p>
      ) : (
        <table className="table">
          <thead>
            <tr>
              <th scope="col">Step</th>
              <th scope="col">Policy</th>
              <th scope="col">Time</th>
              <th scope="col">Folder</th>
              <th scope="col">Export</th>
            </tr>
          </thead>
          <tbody>
            {list.slice(0, 20).map((s) => (
              <tr key={s.step}>
                <td className="mono">{s.step}</td>
                <td className="mono">v{s.policyVersion}</td>
                <td className="mono small">{formatEpisodeTime(s.time)}</td>
                <td className="mono small">{s.checkpoint}</td>
                <td>
                  <button
                    type="button"
                    className="button"
                    disabled={exporting !== null}
                    aria-label={`Export the checkpoint of step ${s.step} as a tar archive`}
                    onClick={() => void exportCheckpoint(s.step)}
                  >
                    {exporting === s.step ? 'Exporting…' : 'Export'}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Panel>
  );
}
