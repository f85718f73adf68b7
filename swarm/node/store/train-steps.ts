/**
 * Training steps of each hosted model: one row per optimizer step, with the policy version it produced and the
 * episodes it trained on (train_step_episodes, migration 7). A step's row, its episodes and their `trained` state
 * are written in one transaction (recordTrainStep), so after any crash an episode is `trained` exactly when a step
 * names it. A step whose update was lost in a restart (the weights went back to an older checkpoint) is kept,
 * marked reverted, and its episodes are queued again (revertTrainSteps); the weights restored then get a fresh
 * policy version (policy_restores), so no version number ever names two different sets of weights.
 */
import type { Database } from 'better-sqlite3';
import type { TrainStepSummary } from '../../common/api.ts';
import { addStepToRunTotals, refreshRunTotals } from './run-totals.ts';
import { statement } from './statements.ts';

export interface TrainStep {
  model: string;
  step: number;
  /** The policy version the step produced. */
  policyVersion: number;
  metrics: Record<string, unknown>;
  /** ISO time. */
  createdAt: string;
  /** ISO time the step's update was lost (weights restored from an older checkpoint); null while it stands. */
  revertedAt?: string | null;
  /** The training run it belongs to (training-runs.ts); null for steps recorded outside a run. */
  runId?: string | null;
}

export class TrainStepExistsError extends Error {
  override name = 'TrainStepExistsError';
  constructor(
    readonly model: string,
    readonly step: number,
  ) {
    super(`model ${model} already has a step ${step}`);
  }
}

export function insertTrainStep(db: Database, step: TrainStep): void {
  const result = db
    .prepare(
      `INSERT INTO train_steps (model, step, policy_version, metrics, created_at, run_id) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (model, step) DO NOTHING`,
    )
    .run(step.model, step.step, step.policyVersion, JSON.stringify(step.metrics), step.createdAt, step.runId ?? null);
  if (result.changes === 0) throw new TrainStepExistsError(step.model, step.step);
}

export interface TrainStepRow {
  model: string;
  step: number;
  policy_version: number;
  metrics: string;
  created_at: string;
  reverted_at: string | null;
  run_id: string | null;
}

export function trainStepFromRow(row: TrainStepRow): TrainStep {
  return {
    model: row.model,
    step: row.step,
    policyVersion: row.policy_version,
    metrics: JSON.parse(row.metrics) as Record<string, unknown>,
    createdAt: row.created_at,
    revertedAt: row.reverted_at,
    runId: row.run_id,
  };
}

/** A stored step as the API answers it (TrainStepSummary): what the loop recorded in its metrics, and the row's columns. */
export function stepSummary(step: TrainStep): TrainStepSummary {
  const rest = step.metrics as Omit<TrainStepSummary, 'model' | 'step' | 'policyVersion' | 'time'>;
  return { ...rest, model: step.model, step: step.step, policyVersion: step.policyVersion, time: step.createdAt, revertedAt: step.revertedAt, runId: step.runId ?? null };
}

/** The model's steps after `afterStep` (all when omitted), oldest first, at most `limit` (default 1000). */
export function listTrainSteps(
  db: Database,
  model: string,
  options: { afterStep?: number; limit?: number } = {},
): TrainStep[] {
  const rows = db
    .prepare('SELECT * FROM train_steps WHERE model = ? AND step > ? ORDER BY step LIMIT ?')
    .all(model, options.afterStep ?? -1, options.limit ?? 1000) as TrainStepRow[];
  return rows.map(trainStepFromRow);
}

/** The model's latest step, or undefined before its first. */
export function latestTrainStep(db: Database, model: string): TrainStep | undefined {
  const row = db
    .prepare('SELECT * FROM train_steps WHERE model = ? ORDER BY step DESC LIMIT 1')
    .get(model) as TrainStepRow | undefined;
  return row && trainStepFromRow(row);
}

/**
 * Records a step, the episodes it trained on and their `trained` state in one transaction: all of it or none.
 * Throws TrainStepExistsError (and writes nothing) when the step number is taken.
 */
export function recordTrainStep(db: Database, step: TrainStep, episodeIds: readonly string[]): void {
  db.transaction(() => {
    insertTrainStep(db, step);
    if (step.runId) addStepToRunTotals(db, step.runId, step.step, typeof step.metrics.rewardMean === 'number' ? step.metrics.rewardMean : null);
    const member = statement(db, 'INSERT INTO train_step_episodes (model, step, episode_id) VALUES (?, ?, ?)');
    const trained = statement(db, "UPDATE episodes SET state = 'trained', abort_reason = NULL WHERE id = ?");
    for (const id of episodeIds) {
      member.run(step.model, step.step, id);
      trained.run(id);
    }
  })();
}

/** The episodes step `step` of `model` trained on, in the order they were recorded. */
export function trainStepEpisodes(db: Database, model: string, step: number): string[] {
  const rows = statement(db, 'SELECT episode_id FROM train_step_episodes WHERE model = ? AND step = ? ORDER BY rowid').all(model, step) as { episode_id: string }[];
  return rows.map((r) => r.episode_id);
}

/** The standing (not reverted) steps that trained on `episodeId`: one after a completed step, none before. */
export function stepsOfEpisode(db: Database, episodeId: string): { model: string; step: number }[] {
  return statement(
    db,
    `SELECT e.model, e.step FROM train_step_episodes e JOIN train_steps s ON s.model = e.model AND s.step = e.step
     WHERE e.episode_id = ? AND s.reverted_at IS NULL ORDER BY e.step`,
  ).all(episodeId) as { model: string; step: number }[];
}

export interface PolicyRestore {
  model: string;
  /** The fresh version the restored weights were given. */
  policyVersion: number;
  /** The checkpoint the weights came from (0: the weights training started from). */
  checkpointStep: number;
  /** The last recorded step at the time. */
  afterStep: number;
  createdAt: string;
}

/**
 * The highest policy version `model` ever handed out: a step's, a restore's, or one its episodes and calls were
 * sampled under (a version the engine served although its step failed to be recorded); 0 before any. Read once
 * per start, so the scan over the model's calls is affordable.
 */
export function maxPolicyVersion(db: Database, model: string): number {
  const row = statement(
    db,
    `SELECT MAX(v) AS v FROM (
       SELECT MAX(policy_version) AS v FROM train_steps WHERE model = ?
       UNION ALL SELECT MAX(policy_version) FROM policy_restores WHERE model = ?
       UNION ALL SELECT MAX(policy_version) FROM episodes WHERE model = ?
       UNION ALL SELECT MAX(c.policy_version) FROM calls c JOIN episodes e ON e.id = c.episode_id WHERE e.model = ?)`,
  ).get(model, model, model, model) as { v: number | null };
  return row.v ?? 0;
}

/** The model's latest restore, or undefined when its weights were never restored from an older checkpoint. */
export function latestPolicyRestore(db: Database, model: string): PolicyRestore | undefined {
  const row = statement(db, 'SELECT * FROM policy_restores WHERE model = ? ORDER BY policy_version DESC LIMIT 1').get(model) as
    | { model: string; policy_version: number; checkpoint_step: number; after_step: number; created_at: string }
    | undefined;
  return row && { model: row.model, policyVersion: row.policy_version, checkpointStep: row.checkpoint_step, afterStep: row.after_step, createdAt: row.created_at };
}

/** The model's latest step after `afterStep` that still stands (not reverted), or undefined. */
export function latestStandingTrainStep(db: Database, model: string, afterStep = 0): TrainStep | undefined {
  const row = statement(db, 'SELECT * FROM train_steps WHERE model = ? AND step > ? AND reverted_at IS NULL ORDER BY step DESC LIMIT 1').get(model, afterStep) as
    | TrainStepRow
    | undefined;
  return row && trainStepFromRow(row);
}

/**
 * The weights went back to checkpoint `restore.checkpointStep`: every standing step after it is marked reverted,
 * the episodes those steps trained on are queued again (state `ended`, as they were when they ended), and the fresh
 * version of the restored weights is recorded. One transaction. Returns the reverted steps and re-queued episodes.
 */
export function revertTrainSteps(db: Database, restore: PolicyRestore): { steps: number[]; episodeIds: string[] } {
  return db.transaction(() => {
    const { model, checkpointStep, createdAt } = restore;
    const steps = (
      statement(db, 'SELECT step FROM train_steps WHERE model = ? AND step > ? AND reverted_at IS NULL ORDER BY step').all(model, checkpointStep) as { step: number }[]
    ).map((r) => r.step);
    const episodeIds: string[] = [];
    const requeue = statement(db, "UPDATE episodes SET state = 'ended', abort_reason = NULL WHERE id = ? AND state = 'trained'");
    for (const step of steps) {
      for (const id of trainStepEpisodes(db, model, step)) if (requeue.run(id).changes > 0) episodeIds.push(id);
    }
    const runs = statement(db, 'SELECT DISTINCT run_id FROM train_steps WHERE model = ? AND step > ? AND reverted_at IS NULL AND run_id IS NOT NULL').all(model, checkpointStep) as { run_id: string }[];
    statement(db, 'UPDATE train_steps SET reverted_at = ? WHERE model = ? AND step > ? AND reverted_at IS NULL').run(createdAt, model, checkpointStep);
    for (const { run_id } of runs) refreshRunTotals(db, run_id);
    statement(db, 'INSERT INTO policy_restores (model, policy_version, checkpoint_step, after_step, created_at) VALUES (?, ?, ?, ?, ?)').run(
      model,
      restore.policyVersion,
      checkpointStep,
      restore.afterStep,
      createdAt,
    );
    return { steps, episodeIds };
  })();
}
