/**
 * Which run a model's training continues when its loop first starts (swarm/common/runs-api.ts):
 *
 * - the newest run of the model has the same configuration hash (configuration and model source): it continues,
 *   with a `resume` event;
 * - otherwise a new run begins, continuing the newest run's weights (its parent, step numbering carried on) with a
 *   `config-change` event naming what changed;
 * - asked for a fresh run (`--new-run`): a new run from the model's source weights, its steps numbered from 1; the
 *   previous runs' untrained rollouts are discarded (another policy sampled them).
 */
import type { RunStart } from '../../common/runs-api.ts';
import type { TrainingRunRow } from '../store/training-runs.ts';
import type { TrainingConfig } from './config.ts';
import { configChanges, configHash, describeChanges } from './run-config.ts';
import type { TrainingStore } from './store-port.ts';

export interface RunRequest {
  model: string;
  /** The model's source as text (`builtin:tiny`, a folder path). */
  source: string;
  config: TrainingConfig;
  /** Start a new run from the source weights even when the newest run could continue. */
  fresh: boolean;
  /** The name to give a new run (default `<model>-<n>`). */
  name?: string;
  /** The highest step number the model ever recorded: a fresh run counts from the next. */
  lastModelStep: number;
  /** The newest checkpoint's model step, null when there is none. */
  latestCheckpointStep: number | null;
}

export interface OpenedRun {
  run: TrainingRunRow;
  /** True when this start created the run. */
  created: boolean;
}

/** Characters a run id may hold (runs-api.ts runIdSchema); others in a model name become `_`. */
const runIdPart = (model: string) => model.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[^A-Za-z0-9]+/, '') || 'model';

export function openRun(store: TrainingStore, request: RunRequest, now = new Date().toISOString()): OpenedRun {
  const runs = store.runs;
  const latest = runs.latest(request.model);
  const hash = configHash(request.config, request.source);
  if (latest && !request.fresh && latest.configHash === hash) {
    const step = store.history(request.model).lastStep - latest.stepOffset;
    runs.addEvent({ runId: latest.id, kind: 'resume', step: Math.max(0, step), label: `resumed (was ${latest.status})`, detail: { previousStatus: latest.status }, time: now });
    return { run: latest, created: false };
  }
  const continued = latest !== null && !request.fresh;
  const numbers = runs.nextNumbers(request.model);
  const id = `${runIdPart(request.model)}-${numbers.ofModel}`;
  const stepOffset = continued ? latest.stepOffset : request.lastModelStep;
  const start: RunStart = continued
    ? {
        kind: 'continued',
        source: request.source,
        parentId: latest.id,
        checkpointStep: request.latestCheckpointStep === null ? null : request.latestCheckpointStep - stepOffset,
      }
    : { kind: 'source', source: request.source };
  const run: TrainingRunRow = {
    id,
    seq: numbers.seq,
    name: request.name ?? id,
    model: request.model,
    status: 'stopped',
    start,
    config: request.config as unknown as Record<string, unknown>,
    configHash: hash,
    seed: request.config.seed,
    stepOffset,
    createdAt: now,
    endedAt: null,
    warnings: [],
  };
  runs.create(run);
  // Rollouts of earlier runs that no step used were sampled by another policy: a fresh run does not train on them.
  const discarded = !continued && latest ? runs.discardEpisodesBefore(request.model, now, `run-changed: sampled before run ${id} began from the source weights`) : 0;
  const startStep = continued ? Math.max(0, request.lastModelStep - stepOffset) : 0;
  runs.addEvent({
    runId: id,
    kind: 'start',
    step: startStep,
    label: continued ? `continues ${latest.name}` : `from ${request.source}${discarded > 0 ? ` (${discarded} untrained episodes of earlier runs discarded)` : ''}`,
    detail: { start, discardedEpisodes: discarded },
    time: now,
  });
  if (continued) {
    const changes = configChanges(latest.config, run.config);
    if (changes.length > 0) {
      runs.addEvent({ runId: id, kind: 'config-change', step: startStep, label: describeChanges(changes), detail: { changes }, time: now });
    }
  }
  return { run, created: true };
}
