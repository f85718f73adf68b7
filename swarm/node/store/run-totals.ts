/**
 * A run's step totals (steps, last step, best and last batch reward), kept on its row: a step adds itself in its own
 * transaction (train-steps.ts recordTrainStep), a revert recounts. Separate from training-runs.ts so that the write
 * side and the migrations need nothing of the read model.
 */
import type { Database } from 'better-sqlite3';
import { statement } from './statements.ts';

/** Adds one recorded step to its run's totals. */
export function addStepToRunTotals(db: Database, runId: string, step: number, rewardMean: number | null): void {
  statement(
    db,
    `UPDATE training_runs SET steps = steps + 1, last_step = MAX(last_step, ? - step_offset), last_reward = ?,
       best_reward = CASE WHEN ? IS NULL THEN best_reward WHEN best_reward IS NULL OR ? > best_reward THEN ? ELSE best_reward END
     WHERE id = ?`,
  ).run(step, rewardMean, rewardMean, rewardMean, rewardMean, runId);
}

/** Recounts a run's totals from its standing steps (after a revert, or for steps recorded before totals were kept). */
export function refreshRunTotals(db: Database, runId: string): void {
  db.prepare(
    `UPDATE training_runs SET
       steps = (SELECT COUNT(*) FROM train_steps WHERE run_id = training_runs.id AND reverted_at IS NULL),
       last_step = COALESCE((SELECT MAX(step) FROM train_steps WHERE run_id = training_runs.id AND reverted_at IS NULL) - step_offset, 0),
       best_reward = (SELECT MAX(json_extract(metrics, '$.rewardMean')) FROM train_steps WHERE run_id = training_runs.id AND reverted_at IS NULL),
       last_reward = (SELECT json_extract(metrics, '$.rewardMean') FROM train_steps WHERE run_id = training_runs.id AND reverted_at IS NULL ORDER BY step DESC LIMIT 1)
     WHERE id = ?`,
  ).run(runId);
}
