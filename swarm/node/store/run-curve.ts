/**
 * A study run's curve from its own store: every standing step of its model (model steps, which continue across a
 * successive-halving promotion), every held-out evaluation per policy version at the step that produced it, the
 * training runs it made, and the evaluation of its final weights.
 */
import type { Database } from 'better-sqlite3';
import type { StudyRunCurve } from '../../common/research-api.ts';

/** The run's curve: every standing step (model steps, which continue across a promotion) and every eval point. */
export function runCurve(db: Database, model: string): StudyRunCurve {
  const steps = (
    db
      .prepare(
        `SELECT step, policy_version AS policyVersion, json_extract(metrics, '$.rewardMean') AS rewardMean,
                json_extract(metrics, '$.successRate') AS successRate, json_extract(metrics, '$.loss') AS loss,
                json_extract(metrics, '$.kl') AS kl
         FROM train_steps WHERE model = ? AND reverted_at IS NULL ORDER BY step`,
      )
      .all(model) as { step: number; policyVersion: number; rewardMean: number; successRate: number | null; loss: number | null; kl: number | null }[]
  ).map(({ policyVersion: _version, ...rest }) => rest);
  const versions = db
    .prepare('SELECT step, policy_version AS v FROM train_steps WHERE model = ? AND reverted_at IS NULL ORDER BY policy_version')
    .all(model) as { step: number; v: number }[];
  /** The step whose weights a policy version names: the newest step that produced it or an older one; 0 before any. */
  const stepOf = (version: number) => versions.filter((row) => row.v <= version).at(-1)?.step ?? 0;
  const evals = (
    db
      .prepare(
        `SELECT policy_version AS v, COUNT(*) AS episodes, AVG(COALESCE(reward, 0)) AS meanReward,
                SUM(CASE WHEN success = 1 THEN 1 ELSE 0 END) AS succeeded
         FROM episodes WHERE model = ? AND kind = 'eval' AND state != 'active' GROUP BY policy_version ORDER BY policy_version`,
      )
      .all(model) as { v: number; episodes: number; meanReward: number; succeeded: number }[]
  ).map((row) => ({ step: stepOf(row.v), policyVersion: row.v, episodes: row.episodes, successRate: row.succeeded / row.episodes, meanReward: row.meanReward }));
  const runIds = (db.prepare('SELECT id FROM training_runs WHERE model = ? ORDER BY seq').all(model) as { id: string }[]).map((r) => r.id);
  const lastVersion = versions.length ? Math.max(...versions.map((v) => v.v)) : null;
  const finalEval = evals.find((e) => e.policyVersion === lastVersion) ?? null;
  return { runIds, steps, evals, finalEval };
}

