/**
 * Two training runs of model `tiny` written straight into a data dir's store with the store's own functions (much
 * faster than training them): run `tiny-1` (fresh, 5 steps, eval episodes at versions 0 and 5) and `tiny-2`
 * (continued from it with another learning rate, 3 steps, model steps 6–8). Their episodes are described by
 * SEEDED so that tests can count what an export should hold.
 */
import type { Database } from 'better-sqlite3';
import type { TrainStepSummary } from '../../../common/api.ts';
import { dataPaths } from '../../paths.ts';
import { openStore } from '../../store/db.ts';
import { insertEpisode, updateEpisodeState } from '../../store/episodes.ts';
import { recordTrainStep } from '../../store/train-steps.ts';
import { insertRun, insertRunEvent, type TrainingRunRow } from '../../store/training-runs.ts';
import { defaultTrainingConfig } from '../../training/config.ts';

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();

export const SEEDED = {
  model: 'tiny',
  runs: ['tiny-1', 'tiny-2'] as const,
  /** Per run: standing steps. */
  steps: { 'tiny-1': 5, 'tiny-2': 3 } as Record<string, number>,
  /** Train episodes per step of a run (each step trains on the episodes sampled on the previous step's weights). */
  trainPerStep: 4,
  /** Eval episodes of tiny-1 at version 0 and at version 5. */
  evalPerPoint: 3,
  /** Clients alternate a, b over a run's train episodes. */
  clients: ['calc-a', 'calc-b'] as const,
};

/** Metrics of step `n` of a run: rewards rise with n. */
export function stepSummary(model: string, step: number, runStep: number): Omit<TrainStepSummary, 'model' | 'step' | 'policyVersion' | 'time'> {
  return {
    groups: 2,
    episodes: SEEDED.trainPerStep,
    samples: SEEDED.trainPerStep,
    rewardMean: 0.1 * runStep,
    rewardStd: 0.05,
    successRate: 0.1 * runStep,
    naiveTokens: 300,
    discardedGroups: 1,
    discardedShare: 1 / 3,
    responseTokensMean: 20 + runStep,
    rolloutTokensPerS: 100,
    phases: { rolloutMs: 1000, drainMs: 10, updateMs: 200 },
    metrics: { loss: 1 / runStep, clipFraction: 0.01, kl: 0.001 * runStep, entropy: 2, gradNorm: 0.5, tokens: 100, trainedTokens: 80, microBatches: 1, timeMs: 100 },
    checkpoint: step % 5 === 0 ? `/ckpt/${model}/step-${step}` : null,
  };
}

interface SeedRun {
  id: string;
  seq: number;
  createdAt: number;
  stepOffset: number;
  learningRate: number;
  start: TrainingRunRow['start'];
}

function seedRun(db: Database, spec: SeedRun, withEvals: boolean): void {
  const base = defaultTrainingConfig({ kind: 'builtin', name: 'tiny' }, false);
  const config = { ...base, checkpointEvery: 5, train: { ...base.train, learningRate: spec.learningRate } };
  insertRun(db, {
    id: spec.id,
    seq: spec.seq,
    name: spec.id,
    model: SEEDED.model,
    status: 'stopped',
    start: spec.start,
    config: config as unknown as Record<string, unknown>,
    configHash: `hash-${spec.id}`,
    seed: 7,
    stepOffset: spec.stepOffset,
    createdAt: iso(spec.createdAt),
    endedAt: iso(spec.createdAt + HOUR / 2),
    warnings: [],
  });
  insertRunEvent(db, { runId: spec.id, kind: 'start', step: 0, label: 'started', detail: {}, time: iso(spec.createdAt) });
  let t = spec.createdAt + 1000;
  const evalsAt = (version: number) => {
    for (let i = 0; i < SEEDED.evalPerPoint; i++) {
      const id = `${spec.id}-eval-v${version}-${i}`;
      insertEpisode(db, { id, model: SEEDED.model, taskId: `held-${i}`, kind: 'eval', policyVersion: version, client: 'eval', createdAt: iso((t += 1000)) });
      updateEpisodeState(db, id, { state: 'ended', reward: i === 0 ? 1 : 0, success: i === 0, endedAt: iso(t + 500) });
    }
  };
  if (withEvals) evalsAt(spec.stepOffset);
  for (let runStep = 1; runStep <= SEEDED.steps[spec.id]; runStep++) {
    const step = spec.stepOffset + runStep;
    const ids: string[] = [];
    for (let i = 0; i < SEEDED.trainPerStep; i++) {
      const id = `${spec.id}-s${runStep}-${i}`;
      insertEpisode(db, {
        id,
        model: SEEDED.model,
        taskId: `task-${i % 2}`,
        kind: 'train',
        policyVersion: step - 1,
        client: SEEDED.clients[i % 2],
        createdAt: iso((t += 1000)),
      });
      updateEpisodeState(db, id, { state: 'ended', reward: i % 2, success: i % 2 === 1, endedAt: iso(t + 500) });
      ids.push(id);
    }
    recordTrainStep(db, { model: SEEDED.model, step, policyVersion: step, metrics: stepSummary(SEEDED.model, step, runStep), createdAt: iso((t += 1000)), runId: spec.id }, ids);
  }
  if (withEvals) evalsAt(spec.stepOffset + SEEDED.steps[spec.id]);
}

/** Writes both runs into `dataDir`'s store (created, migrated) and closes it. */
export function seedRuns(dataDir: string): void {
  const db = openStore(dataPaths(dataDir).store);
  try {
    seedRun(db, { id: 'tiny-1', seq: 1, createdAt: T0, stepOffset: 0, learningRate: 5e-4, start: { kind: 'source', source: 'builtin:tiny' } }, true);
    seedRun(
      db,
      { id: 'tiny-2', seq: 2, createdAt: T0 + HOUR, stepOffset: 5, learningRate: 3e-4, start: { kind: 'continued', source: 'builtin:tiny', parentId: 'tiny-1', checkpointStep: 5 } },
      false,
    );
  } finally {
    db.close();
  }
}

/** Many steps on one run (for the thinning of long runs' plots), in one transaction. */
export function seedLongRun(dataDir: string, steps: number): void {
  const db = openStore(dataPaths(dataDir).store);
  try {
    const base = defaultTrainingConfig({ kind: 'builtin', name: 'tiny' }, false);
    insertRun(db, {
      id: 'long-1',
      seq: 1,
      name: 'long-1',
      model: 'long',
      status: 'running',
      start: { kind: 'source', source: 'builtin:tiny' },
      config: { ...base, train: { ...base.train, klCoef: 0 } } as unknown as Record<string, unknown>,
      configHash: 'hash-long',
      seed: 1,
      stepOffset: 0,
      createdAt: iso(T0),
      endedAt: null,
      warnings: [],
    });
    db.transaction(() => {
      for (let s = 1; s <= steps; s++) recordTrainStep(db, { model: 'long', step: s, policyVersion: s, metrics: stepSummary('long', s, s), createdAt: iso(T0 + s * 1000), runId: 'long-1' }, []);
    })();
  } finally {
    db.close();
  }
}
