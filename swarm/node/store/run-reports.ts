/**
 * Reads only a run's report needs (swarm/node/report/): the train rollouts of the run per policy version they were
 * sampled on, as run steps. Unlike a step's own reward and success (the batch it trained on, uniform groups left
 * out), these count every finished train episode, so a report can say how the policy did on all its rollouts.
 */
import type { Database } from 'better-sqlite3';
import { runWindow, type TrainingRunRow } from './training-runs.ts';
import { statement } from './statements.ts';

/** The train episodes of a run that ran on one policy version. */
export interface RunRolloutPoint {
  /** The run step whose weights sampled them (0: the weights the run started from). */
  step: number;
  policyVersion: number;
  /** Finished train episodes (aborted ones included, as failures). */
  episodes: number;
  aborted: number;
  /** Share whose own success flag is true, over all of them; null when none reported a flag. */
  successRate: number | null;
  meanReward: number | null;
  /** Mean LLM calls per episode (the agent's tool use). */
  callsMean: number | null;
}

/** An upper bound for an open window: later than any ISO time the store holds. */
const OPEN_END = '9999';

export function runRollouts(db: Database, run: TrainingRunRow): RunRolloutPoint[] {
  const window = runWindow(db, run);
  const rows = statement(
    db,
    `SELECT e.policy_version AS v, COUNT(*) AS n, AVG(e.reward) AS meanReward, SUM(e.state = 'aborted') AS aborted,
            SUM(e.success IS NOT NULL) AS flagged, SUM(e.success = 1) AS succeeded,
            AVG((SELECT COUNT(*) FROM calls c WHERE c.episode_id = e.id)) AS callsMean
     FROM episodes e WHERE e.model = ? AND e.kind = 'train' AND e.state != 'active' AND e.created_at >= ? AND e.created_at < ?
     GROUP BY e.policy_version ORDER BY e.policy_version`,
  ).all(run.model, window.from, window.before ?? OPEN_END) as {
    v: number;
    n: number;
    meanReward: number | null;
    aborted: number;
    flagged: number;
    succeeded: number;
    callsMean: number | null;
  }[];
  if (rows.length === 0) return [];
  const versions = statement(db, 'SELECT step, policy_version FROM train_steps WHERE run_id = ? AND reverted_at IS NULL ORDER BY policy_version').all(run.id) as {
    step: number;
    policy_version: number;
  }[];
  return rows.map((row) => {
    // As runEvals: the newest step at or below the version (a restore's version belongs to the step before).
    let step = 0;
    for (const v of versions) if (v.policy_version <= row.v) step = v.step - run.stepOffset;
    return {
      step,
      policyVersion: row.v,
      episodes: row.n,
      aborted: row.aborted,
      successRate: row.flagged > 0 ? row.succeeded / row.n : null,
      meanReward: row.meanReward,
      callsMean: row.callsMean,
    };
  });
}
