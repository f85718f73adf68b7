/**
 * What a study run achieved, read from the run's own store: its standing steps, its held-out evaluations per policy
 * version, and the study's metric over them. The study records these numbers, and its report's tests recompute them
 * from the store with the same functions, so a report never holds a number its runs do not.
 */
import { areaUnderCurve, mean } from '../../common/research/stats.ts';
import type { StudyRunCurve } from '../../common/research-api.ts';
import { openStoreReadOnly } from '../store/read-only.ts';
import { runCurve } from '../store/run-curve.ts';
import { dataPaths } from '../paths.ts';
import type { StudyMetric } from './study-file.ts';
import { RUN_MODEL } from './study-run.ts';

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
    return runCurve(db, RUN_MODEL);
  } finally {
    db.close();
  }
}
