/**
 * Training runs (migration 9, swarm/common/runs-api.ts): one row per run, its recorded events, and the reads the
 * run views need — its steps, held-out evals, per-task table, scripts and checkpoints — each one query.
 *
 * A run's episodes are the model's episodes created from the run's start until the next run of the model began
 * (a model trains one run at a time, and every episode is created under the run then training).
 */
import type { Database } from 'better-sqlite3';
import type { RunStep } from '../../common/api.ts';
import type {
  RunCheckpoint,
  RunEvalPoint,
  RunEvent,
  RunEventKind,
  RunScript,
  RunStart,
  RunStatus,
  RunTaskRow,
  RunWarning,
} from '../../common/runs-api.ts';
import { statement } from './statements.ts';
import { stepSummary, trainStepFromRow, type TrainStepRow } from './train-steps.ts';

export interface TrainingRunRow {
  id: string;
  /** Order of creation across the data dir (newest = highest). */
  seq: number;
  name: string;
  model: string;
  status: RunStatus;
  start: RunStart;
  /** The resolved training configuration, as JSON. */
  config: Record<string, unknown>;
  configHash: string;
  seed: number;
  /** Model step = run step + stepOffset. */
  stepOffset: number;
  createdAt: string;
  endedAt: string | null;
  warnings: RunWarning[];
}

interface RunSqlRow {
  id: string;
  seq: number;
  name: string;
  model: string;
  status: RunStatus;
  start: string;
  config: string;
  config_hash: string;
  seed: number;
  step_offset: number;
  created_at: string;
  ended_at: string | null;
  warnings: string;
  steps: number;
  last_step: number;
  best_reward: number | null;
  last_reward: number | null;
}

function runFromRow(row: RunSqlRow): TrainingRunRow {
  return {
    id: row.id,
    seq: row.seq,
    name: row.name,
    model: row.model,
    status: row.status,
    start: JSON.parse(row.start) as RunStart,
    config: JSON.parse(row.config) as Record<string, unknown>,
    configHash: row.config_hash,
    seed: row.seed,
    stepOffset: row.step_offset,
    createdAt: row.created_at,
    endedAt: row.ended_at,
    warnings: JSON.parse(row.warnings) as RunWarning[],
  };
}

/** The next run's sequence number and how many runs the model has had (its runs are named `<model>-<n>`). */
export function nextRunNumbers(db: Database, model: string): { seq: number; ofModel: number } {
  const seq =
    (statement(db, 'SELECT COALESCE(MAX(seq), 0) AS n FROM training_runs').get() as { n: number }).n + 1;
  const ofModel =
    (statement(db, 'SELECT COUNT(*) AS n FROM training_runs WHERE model = ?').get(model) as { n: number }).n +
    1;
  return { seq, ofModel };
}

export function insertRun(db: Database, run: TrainingRunRow): void {
  statement(
    db,
    `INSERT INTO training_runs (id, seq, name, model, status, start, config, config_hash, seed, step_offset, created_at, ended_at, warnings)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    run.id,
    run.seq,
    run.name,
    run.model,
    run.status,
    JSON.stringify(run.start),
    JSON.stringify(run.config),
    run.configHash,
    run.seed,
    run.stepOffset,
    run.createdAt,
    run.endedAt,
    JSON.stringify(run.warnings),
  );
}

export function getRun(db: Database, id: string): TrainingRunRow | undefined {
  const row = statement(db, 'SELECT * FROM training_runs WHERE id = ?').get(id) as RunSqlRow | undefined;
  return row && runFromRow(row);
}

/** The model's newest run, or undefined before its first. */
export function latestRunOfModel(db: Database, model: string): TrainingRunRow | undefined {
  const row = statement(db, 'SELECT * FROM training_runs WHERE model = ? ORDER BY seq DESC LIMIT 1').get(
    model,
  ) as RunSqlRow | undefined;
  return row && runFromRow(row);
}

/** Runs still marked running or paused: what a peer that died left behind (marked crashed at the next start). */
export function unfinishedRuns(db: Database): TrainingRunRow[] {
  return (
    statement(
      db,
      "SELECT * FROM training_runs WHERE status IN ('running', 'paused') ORDER BY seq",
    ).all() as RunSqlRow[]
  ).map(runFromRow);
}

/** Sets the status; `endedAt` is written for the statuses that end a run's activity and cleared for the others. */
export function updateRunStatus(
  db: Database,
  id: string,
  status: RunStatus,
  at = new Date().toISOString(),
): void {
  const ended = status === 'running' || status === 'paused' ? null : at;
  statement(db, 'UPDATE training_runs SET status = ?, ended_at = ? WHERE id = ?').run(status, ended, id);
}

export function updateRunConfig(
  db: Database,
  id: string,
  config: Record<string, unknown>,
  configHash: string,
): void {
  statement(db, 'UPDATE training_runs SET config = ?, config_hash = ? WHERE id = ?').run(
    JSON.stringify(config),
    configHash,
    id,
  );
}

export function setRunWarnings(db: Database, id: string, warnings: readonly RunWarning[]): void {
  statement(db, 'UPDATE training_runs SET warnings = ? WHERE id = ?').run(JSON.stringify(warnings), id);
}

export interface RunEventRecord {
  runId: string;
  kind: RunEventKind;
  step: number;
  label: string;
  detail: Record<string, unknown>;
  time: string;
}

export function insertRunEvent(db: Database, event: RunEventRecord): void {
  statement(
    db,
    'INSERT INTO run_events (run_id, step, kind, label, detail, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(event.runId, event.step, event.kind, event.label, JSON.stringify(event.detail), event.time);
}

/** The recorded events (start, resume, config change, stop, …), oldest first. */
export function listRunEvents(db: Database, runId: string): RunEvent[] {
  const rows = statement(db, 'SELECT * FROM run_events WHERE run_id = ? ORDER BY created_at, rowid').all(
    runId,
  ) as {
    step: number;
    kind: RunEventKind;
    label: string;
    detail: string;
    created_at: string;
  }[];
  return rows.map((r) => ({
    kind: r.kind,
    step: r.step,
    label: r.label,
    detail: JSON.parse(r.detail) as Record<string, unknown>,
    time: r.created_at,
  }));
}

/** Aggregates of a run's standing steps, as the runs list shows them (kept on the row: run-totals.ts). */
export interface RunStepTotals {
  steps: number;
  lastStep: number;
  bestReward: number | null;
  lastReward: number | null;
}

export function runStepTotals(db: Database, runId: string): RunStepTotals {
  const row = statement(
    db,
    'SELECT steps, last_step AS lastStep, best_reward AS bestReward, last_reward AS lastReward FROM training_runs WHERE id = ?',
  ).get(runId) as RunStepTotals | undefined;
  return row ?? { steps: 0, lastStep: 0, bestReward: null, lastReward: null };
}

/** A page of runs, newest first, and how many there are. */
export function listRuns(
  db: Database,
  options: { limit: number; offset: number },
): { runs: TrainingRunRow[]; total: number } {
  const rows = statement(db, 'SELECT * FROM training_runs ORDER BY seq DESC LIMIT ? OFFSET ?').all(
    options.limit,
    options.offset,
  ) as RunSqlRow[];
  const total = (statement(db, 'SELECT COUNT(*) AS n FROM training_runs').get() as { n: number }).n;
  return { runs: rows.map(runFromRow), total };
}

/** Every run of a model, oldest first. */
export function runsOfModel(db: Database, model: string): TrainingRunRow[] {
  return (
    statement(db, 'SELECT * FROM training_runs WHERE model = ? ORDER BY seq').all(model) as RunSqlRow[]
  ).map(runFromRow);
}

/** The run's episode window: from its start until the model's next run began (null: still open). */
export function runWindow(db: Database, run: TrainingRunRow): { from: string; before: string | null } {
  const next = statement(
    db,
    'SELECT created_at FROM training_runs WHERE model = ? AND seq > ? ORDER BY seq LIMIT 1',
  ).get(run.model, run.seq) as { created_at: string } | undefined;
  return { from: run.createdAt, before: next?.created_at ?? null };
}

/** An upper bound for an open window: later than any ISO time the store holds. */
export const OPEN_END = '9999';

/** The run's steps after run step `afterRunStep` (all when omitted), oldest first, at most `limit`. */
export function listRunSteps(
  db: Database,
  run: TrainingRunRow,
  options: { afterRunStep?: number; limit: number },
): RunStep[] {
  const rows = statement(
    db,
    'SELECT * FROM train_steps WHERE run_id = ? AND step > ? ORDER BY step LIMIT ?',
  ).all(run.id, run.stepOffset + (options.afterRunStep ?? -1), options.limit) as TrainStepRow[];
  return rows.map((row) => ({
    ...stepSummary(trainStepFromRow(row)),
    runId: run.id,
    runStep: row.step - run.stepOffset,
  }));
}

/** Every step of the run, streamed oldest first in pages (for CSV/JSONL exports of runs of any length). */
export function* iterateRunSteps(db: Database, run: TrainingRunRow, pageSize = 1000): Generator<RunStep> {
  let after = -1;
  for (;;) {
    const page = listRunSteps(db, run, { afterRunStep: after, limit: pageSize });
    yield* page;
    if (page.length < pageSize) return;
    after = page[page.length - 1].runStep;
  }
}

/** Checkpoints the run's standing steps wrote, newest first. */
export function runCheckpoints(db: Database, run: TrainingRunRow): RunCheckpoint[] {
  const rows = statement(
    db,
    `SELECT step, policy_version, created_at, json_extract(metrics, '$.checkpoint') AS dir FROM train_steps
     WHERE run_id = ? AND reverted_at IS NULL AND json_extract(metrics, '$.checkpoint') IS NOT NULL ORDER BY step DESC`,
  ).all(run.id) as { step: number; policy_version: number; created_at: string; dir: string }[];
  return rows.map((r) => ({
    step: r.step - run.stepOffset,
    modelStep: r.step,
    policyVersion: r.policy_version,
    time: r.created_at,
    dir: r.dir,
  }));
}

/**
 * Held-out evaluation per policy version the run's eval episodes ran on, as run steps: the step that produced the
 * version (0 for the weights the run started from). Aborted eval episodes count as failures.
 */
export function runEvals(db: Database, run: TrainingRunRow): RunEvalPoint[] {
  const window = runWindow(db, run);
  const rows = statement(
    db,
    `SELECT policy_version AS v, COUNT(*) AS n, AVG(reward) AS meanReward,
            SUM(CASE WHEN success IS NOT NULL THEN 1 ELSE 0 END) AS flagged, SUM(CASE WHEN success = 1 THEN 1 ELSE 0 END) AS succeeded,
            MAX(COALESCE(ended_at, created_at)) AS last
     FROM episodes WHERE model = ? AND kind = 'eval' AND state != 'active' AND created_at >= ? AND created_at < ?
     GROUP BY policy_version ORDER BY policy_version`,
  ).all(run.model, window.from, window.before ?? OPEN_END) as {
    v: number;
    n: number;
    meanReward: number | null;
    flagged: number;
    succeeded: number;
    last: string;
  }[];
  if (rows.length === 0) return [];
  const stepOf = versionSteps(db, run);
  return rows.map((row) => ({
    step: stepOf(row.v),
    policyVersion: row.v,
    episodes: row.n,
    successRate: row.flagged > 0 ? row.succeeded / row.n : null,
    meanReward: row.meanReward,
    time: row.last,
  }));
}

/**
 * The run step whose weights a policy version names: the newest standing step that produced it or an older one (a
 * version no step produced, such as a restore's, belongs to the step before); 0 for the weights the run started
 * from. Reads the run's steps once; the function answers from memory.
 */
export function versionSteps(db: Database, run: TrainingRunRow): (policyVersion: number) => number {
  const versions = statement(
    db,
    'SELECT step, policy_version FROM train_steps WHERE run_id = ? AND reverted_at IS NULL ORDER BY policy_version',
  ).all(run.id) as {
    step: number;
    policy_version: number;
  }[];
  return (policyVersion) => {
    let step = 0;
    for (const v of versions) if (v.policy_version <= policyVersion) step = v.step - run.stepOffset;
    return step;
  };
}

/** The per-task table: train and held-out tasks apart, the most-run first, at most `limit` rows. */
export function runTasks(db: Database, run: TrainingRunRow, limit: number): RunTaskRow[] {
  const window = runWindow(db, run);
  const rows = statement(
    db,
    `WITH w AS (
       SELECT task_id, kind, reward, success, policy_version FROM episodes
       WHERE model = ? AND state != 'active' AND created_at >= ? AND created_at < ?),
     latest AS (SELECT task_id, kind, MAX(policy_version) AS v FROM w GROUP BY task_id, kind)
     SELECT w.task_id AS taskId, w.kind AS kind, COUNT(*) AS episodes, AVG(w.reward) AS meanReward,
            CASE WHEN SUM(w.success IS NOT NULL) > 0 THEN SUM(w.success = 1) * 1.0 / COUNT(*) END AS successRate,
            AVG(CASE WHEN w.policy_version = l.v THEN w.reward END) AS lastReward
     FROM w JOIN latest l ON l.task_id = w.task_id AND l.kind = w.kind
     GROUP BY w.task_id, w.kind ORDER BY w.kind DESC, episodes DESC, w.task_id LIMIT ?`,
  ).all(run.model, window.from, window.before ?? OPEN_END, limit) as RunTaskRow[];
  return rows;
}

/** The scripts (per attached version) whose episodes fall in the run, in the order they first ran. */
export function runScripts(db: Database, run: TrainingRunRow): RunScript[] {
  const window = runWindow(db, run);
  return statement(
    db,
    `SELECT e.client AS client, e.script_hash AS hash, COUNT(*) AS episodes, MIN(e.created_at) AS firstAt, MAX(e.created_at) AS lastAt,
            (SELECT MIN(s.version) FROM client_scripts s WHERE s.name = e.client AND s.hash = e.script_hash) AS version
     FROM episodes e WHERE e.model = ? AND e.created_at >= ? AND e.created_at < ? AND e.client IS NOT NULL
     GROUP BY e.client, e.script_hash ORDER BY firstAt`,
  ).all(run.model, window.from, window.before ?? OPEN_END) as RunScript[];
}

/** The run step in effect at an ISO time: the number of the run's standing steps recorded before it. */
export function runStepAt(db: Database, run: TrainingRunRow, time: string): number {
  const row = statement(
    db,
    'SELECT MAX(step) AS step FROM train_steps WHERE run_id = ? AND reverted_at IS NULL AND created_at <= ?',
  ).get(run.id, time) as {
    step: number | null;
  };
  return row.step === null ? 0 : row.step - run.stepOffset;
}

/** Policy restores (a restart that went back to a checkpoint) during the run's window, as revert markers. */
export function runRestores(
  db: Database,
  run: TrainingRunRow,
): { checkpointStep: number; afterStep: number; time: string }[] {
  const window = runWindow(db, run);
  const rows = statement(
    db,
    'SELECT checkpoint_step, after_step, created_at FROM policy_restores WHERE model = ? AND created_at >= ? AND created_at < ? ORDER BY created_at',
  ).all(run.model, window.from, window.before ?? OPEN_END) as {
    checkpoint_step: number;
    after_step: number;
    created_at: string;
  }[];
  return rows.map((r) => ({
    checkpointStep: r.checkpoint_step - run.stepOffset,
    afterStep: r.after_step - run.stepOffset,
    time: r.created_at,
  }));
}

/**
 * Ended, unmarked train episodes of the model from before `before`: sampled under another run's weights, they are
 * marked discarded when a fresh run starts (they would otherwise join its first batch).
 */
export function discardEpisodesBefore(db: Database, model: string, before: string, reason: string): number {
  return statement(
    db,
    `UPDATE episodes SET state = 'discarded', abort_reason = ? WHERE model = ? AND kind = 'train' AND state = 'ended' AND created_at < ?`,
  ).run(reason, model, before).changes;
}
