/**
 * Models & training: per hosted model, its engine state, policy version and step; start, pause or stop its
 * training loop; live curves of reward, success, loss, KL, clip fraction, entropy, throughput and merge savings;
 * the checkpoints it wrote.
 */
import { useState } from 'react';
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
import { LineChart } from './LineChart.tsx';
import '../episodes/data-views.css';
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
  const change = `${statusChange}|${pushedStep}|${lastError}`;
  const refresh = () => {
    if (!name) return;
    const request = apiRequest();
    void loadTraining(appStore, request, name);
    void loadSteps(appStore, request, name);
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
      {selected && <Charts name={selected.name} />}
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
            className="button button--primary"
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

const percent = (v: number) => `${(v * 100).toFixed(0)}%`;
const compact = (v: number) =>
  Math.abs(v) >= 1000 ? `${(v / 1000).toFixed(1)}k` : Math.abs(v) >= 10 ? v.toFixed(0) : v.toPrecision(3);

function Charts({ name }: { name: string }) {
  const training = useAppStore((s) => modelsSelectors.training(s.models, name));
  const series = modelsSelectors.stepSeries(training.steps);
  const v = training.stepsVersion;
  if (training.steps.length === 0) {
    return (
      <Panel title="Training curves">
        <EmptyState icon="timeline" title="Curves appear after the first optimizer step">
          <p>
            A step runs once enough groups of finished train episodes are collected (attach a script in
            Clients).
          </p>
        </EmptyState>
      </Panel>
    );
  }
  const spread = modelsSelectors.hasValues(series.rewardStd) ? modelsSelectors.rewardBand(series) : undefined;
  return (
    <Panel
      title="Training curves"
      aside={<span className="count">{formatCount(training.steps.length)} steps</span>}
      testId="training-charts"
    >
      <div className="charts">
        <LineChart
          title="Reward (mean ± std)"
          x={series.step}
          lines={[{ label: 'mean', values: series.rewardMean, colour: '--accent' }]}
          band={spread && { ...spread, colour: '--accent' }}
          version={v}
          testId="chart-reward"
        />
        {modelsSelectors.hasValues(series.success) && (
          <LineChart
            title="Success"
            x={series.step}
            lines={[{ label: 'success', values: series.success, colour: '--ok' }]}
            version={v}
            format={percent}
          />
        )}
        <LineChart
          title="PPO loss"
          x={series.step}
          lines={[{ label: 'loss', values: series.loss, colour: '--danger' }]}
          version={v}
        />
        <LineChart
          title="KL to reference"
          x={series.step}
          lines={[{ label: 'KL', values: series.kl, colour: '--info' }]}
          version={v}
        />
        <LineChart
          title="Clip fraction"
          x={series.step}
          lines={[{ label: 'clip', values: series.clipFraction, colour: '--warn' }]}
          version={v}
          format={percent}
        />
        <LineChart
          title="Entropy"
          x={series.step}
          lines={[{ label: 'entropy', values: series.entropy, colour: '--ok' }]}
          version={v}
        />
        <LineChart
          title="Tokens / s (update)"
          x={series.step}
          lines={[{ label: 'tokens/s', values: series.tokensPerSecond, colour: '--accent' }]}
          version={v}
          format={compact}
        />
        {modelsSelectors.hasValues(series.mergeRatio) && (
          <LineChart
            title="Merge savings (naive ÷ merged tokens)"
            x={series.step}
            lines={[{ label: 'ratio', values: series.mergeRatio, colour: '--info' }]}
            version={v}
            format={(n) => `${n.toFixed(2)}×`}
          />
        )}
      </div>
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
        <p className="muted">
          No checkpoint yet
          {training.state ? ` (one every ${training.state.config.checkpointEvery} steps)` : ''}.
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
