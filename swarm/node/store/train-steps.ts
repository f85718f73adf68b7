/** Training steps of each hosted model: one row per optimizer step, with the policy version it produced. */
import type { Database } from 'better-sqlite3';

export interface TrainStep {
  model: string;
  step: number;
  /** The policy version the step produced. */
  policyVersion: number;
  metrics: Record<string, unknown>;
  /** ISO time. */
  createdAt: string;
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
      `INSERT INTO train_steps (model, step, policy_version, metrics, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (model, step) DO NOTHING`,
    )
    .run(step.model, step.step, step.policyVersion, JSON.stringify(step.metrics), step.createdAt);
  if (result.changes === 0) throw new TrainStepExistsError(step.model, step.step);
}

interface TrainStepRow {
  model: string;
  step: number;
  policy_version: number;
  metrics: string;
  created_at: string;
}

function trainStepFromRow(row: TrainStepRow): TrainStep {
  return {
    model: row.model,
    step: row.step,
    policyVersion: row.policy_version,
    metrics: JSON.parse(row.metrics) as Record<string, unknown>,
    createdAt: row.created_at,
  };
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
