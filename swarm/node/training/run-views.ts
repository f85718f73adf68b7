/**
 * Runs as the control API, the CLI and the reports show them (swarm/common/runs-api.ts), read from the store of a
 * running peer or of a data dir no peer has open. Events recorded as they happened (start, resume, config change,
 * stop, finish, fail) are joined with those the store already says: checkpoints, hot swaps (a script's next
 * version producing episodes) and reverts (a restart that went back to a checkpoint).
 */
import type { Database } from 'better-sqlite3';
import type { ModelSource } from '../../../worker/common/engine.ts';
import type { RunComparison, RunDetail, RunEvent, RunSummary } from '../../common/runs-api.ts';
import {
  getRun,
  listRunEvents,
  runCheckpoints,
  runEvals,
  runRestores,
  runScripts,
  runStepAt,
  runStepTotals,
  runWindow,
  type TrainingRunRow,
} from '../store/training-runs.ts';
import { defaultTrainingConfig } from './config.ts';
import { configChanges, differingKeys } from './run-config.ts';

export class RunNotFoundError extends Error {
  override name = 'RunNotFoundError';
  constructor(readonly runId: string) {
    super(`no run "${runId}" in this data dir; \`agentjet runs list\` (or GET /api/runs) lists them`);
  }
}

export function requireRun(db: Database, id: string): TrainingRunRow {
  const run = getRun(db, id);
  if (!run) throw new RunNotFoundError(id);
  return run;
}

export function runSummary(db: Database, run: TrainingRunRow): RunSummary {
  const totals = runStepTotals(db, run.id);
  const evals = runEvals(db, run);
  return {
    id: run.id,
    name: run.name,
    model: run.model,
    status: run.status,
    start: run.start,
    seed: run.seed,
    configHash: run.configHash,
    createdAt: run.createdAt,
    endedAt: run.endedAt,
    steps: totals.steps,
    lastStep: totals.lastStep,
    bestReward: totals.bestReward,
    lastReward: totals.lastReward,
    lastEval: evals.at(-1) ?? null,
    warnings: run.warnings,
    episodeWindow: runWindow(db, run),
  };
}

/** The source text a run records, as a model source (for the model's defaults); null when it cannot tell. */
function sourceOf(run: TrainingRunRow): ModelSource | null {
  const text = run.start.source;
  if (text.startsWith('builtin:')) return { kind: 'builtin', name: text.slice('builtin:'.length) };
  return text.startsWith('unknown') ? null : { kind: 'hf', path: text };
}

export function runDetail(db: Database, run: TrainingRunRow): RunDetail {
  const defaults = defaultTrainingConfig(sourceOf(run), run.config.lora != null);
  const changed = Object.keys(run.config).length === 0 ? [] : configChanges(defaults as unknown as Record<string, unknown>, run.config).map((c) => c.key);
  const checkpoints = runCheckpoints(db, run);
  const scripts = runScripts(db, run);
  return {
    ...runSummary(db, run),
    config: run.config,
    changedFromDefaults: changed,
    events: runEvents(db, run, checkpoints, scripts),
    scripts,
    checkpoints,
    stepOffset: run.stepOffset,
  };
}

/** Recorded events and the ones the store says, in time order. */
function runEvents(db: Database, run: TrainingRunRow, checkpoints: RunDetail['checkpoints'], scripts: RunDetail['scripts']): RunEvent[] {
  const events: RunEvent[] = [...listRunEvents(db, run.id)];
  for (const c of checkpoints) events.push({ kind: 'checkpoint', step: c.step, time: c.time, label: `checkpoint of step ${c.step}`, detail: { dir: c.dir, modelStep: c.modelStep } });
  const seen = new Set<string>();
  for (const script of scripts) {
    const first = !seen.has(script.client);
    seen.add(script.client);
    if (first) continue;
    events.push({
      kind: 'hot-swap',
      step: runStepAt(db, run, script.firstAt),
      time: script.firstAt,
      label: `${script.client} ${script.version === null ? '' : `v${script.version} `}(${(script.hash ?? '').slice(0, 8)})`,
      detail: { client: script.client, version: script.version, hash: script.hash },
    });
  }
  for (const r of runRestores(db, run)) {
    if (r.afterStep <= r.checkpointStep) continue; // a fresh run's start, not a revert
    events.push({ kind: 'revert', step: r.checkpointStep, time: r.time, label: `steps ${r.checkpointStep + 1}–${r.afterStep} lost in a crash; back to step ${r.checkpointStep}`, detail: r });
  }
  return events.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
}

export function compareRuns(db: Database, ids: readonly string[]): RunComparison {
  const runs = ids.map((id) => runDetail(db, requireRun(db, id)));
  return { runs, differingKeys: differingKeys(runs.map((r) => r.config)) };
}
