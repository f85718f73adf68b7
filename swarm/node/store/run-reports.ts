/**
 * Reads only a run's report needs (swarm/node/report/): the train rollouts of the run per policy version they were
 * sampled on, as run steps. Unlike a step's own reward and success (the batch it trained on, uniform groups left
 * out), these count every finished train episode, so a report can say how the policy did on all its rollouts.
 */
import type { Database } from 'better-sqlite3';
import { OPEN_END, runWindow, versionSteps, type TrainingRunRow } from './training-runs.ts';
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

/** The run's finished train episodes per policy version, each at the run step whose weights sampled it. */
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
  const stepOf = versionSteps(db, run);
  return rows.map((row) => ({
    step: stepOf(row.v),
    policyVersion: row.v,
    episodes: row.n,
    aborted: row.aborted,
    successRate: row.flagged > 0 ? row.succeeded / row.n : null,
    meanReward: row.meanReward,
    callsMean: row.callsMean,
  }));
}
