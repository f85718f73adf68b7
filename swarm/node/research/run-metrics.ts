/**
 * What a study run achieved, read from the run's own store: its standing steps, its held-out evaluations per policy
 * version, and the study's metric over them. The study records these numbers, and its report's tests recompute them
 * from the store with the same functions, so a report never holds a number its runs do not.
 */
import type { Database } from 'better-sqlite3';
import { areaUnderCurve, mean } from '../../common/research/stats.ts';
import type { StudyRunCurve } from '../../common/research-api.ts';
import { openStoreReadOnly } from '../store/read-only.ts';
import { dataPaths } from '../paths.ts';
import type { StudyMetric } from './study-file.ts';
import { RUN_MODEL } from './study-run.ts';

/** The run's curve: every standing step (model steps, which continue across a promotion) and every eval point. */
export function runCurve(db: Database): StudyRunCurve {
  const steps = (
    db
      .prepare(
        `SELECT step, policy_version AS policyVersion, json_extract(metrics, '$.rewardMean') AS rewardMean,
                json_extract(metrics, '$.successRate') AS successRate, json_extract(metrics, '$.loss') AS loss,
                json_extract(metrics, '$.kl') AS kl
         FROM train_steps WHERE model = ? AND reverted_at IS NULL ORDER BY step`,
      )
      .all(RUN_MODEL) as { step: number; policyVersion: number; rewardMean: number; successRate: number | null; loss: number | null; kl: number | null }[]
  ).map(({ policyVersion: _version, ...rest }) => rest);
  const versions = db
    .prepare('SELECT step, policy_version AS v FROM train_steps WHERE model = ? AND reverted_at IS NULL ORDER BY policy_version')
    .all(RUN_MODEL) as { step: number; v: number }[];
  /** The step whose weights a policy version names: the newest step that produced it or an older one; 0 before any. */
  const stepOf = (version: number) => versions.filter((row) => row.v <= version).at(-1)?.step ?? 0;
  const evals = (
    db
      .prepare(
        `SELECT policy_version AS v, COUNT(*) AS episodes, AVG(COALESCE(reward, 0)) AS meanReward,
                SUM(CASE WHEN success = 1 THEN 1 ELSE 0 END) AS succeeded
         FROM episodes WHERE model = ? AND kind = 'eval' AND state != 'active' GROUP BY policy_version ORDER BY policy_version`,
      )
      .all(RUN_MODEL) as { v: number; episodes: number; meanReward: number; succeeded: number }[]
  ).map((row) => ({ step: stepOf(row.v), policyVersion: row.v, episodes: row.episodes, successRate: row.succeeded / row.episodes, meanReward: row.meanReward }));
  const runIds = (db.prepare('SELECT id FROM training_runs WHERE model = ? ORDER BY seq').all(RUN_MODEL) as { id: string }[]).map((r) => r.id);
  const lastVersion = versions.length ? Math.max(...versions.map((v) => v.v)) : null;
  const finalEval = evals.find((e) => e.policyVersion === lastVersion) ?? null;
  return { runIds, steps, evals, finalEval };
}

/** The study's metric of one run (higher is better); null when the run has nothing to measure it with. */
export function metricOf(metric: StudyMetric, curve: StudyRunCurve): number | null {
  switch (metric.kind) {
    case 'final-eval-success':
      return curve.finalEval?.successRate ?? null;
    case 'final-eval-reward':
      return curve.finalEval?.meanReward ?? null;
    case 'last-k-reward': {
      const last = curve.steps.slice(-metric.k);
      return last.length ? mean(last.map((s) => s.rewardMean)) : null;
    }
    case 'eval-auc':
      return areaUnderCurve(curve.evals.map((e) => ({ step: e.step, value: e.successRate })));
  }
}

/** Reads a run's curve from its data dir (read-only, beside or after its peer). */
export function readRunCurve(dataDir: string): StudyRunCurve {
  const db = openStoreReadOnly(dataPaths(dataDir).store);
  try {
    return runCurve(db);
  } finally {
    db.close();
  }
}
