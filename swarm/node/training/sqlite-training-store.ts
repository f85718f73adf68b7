/**
 * The training loop's store port bound to the peer's SQLite store (swarm/node/store repository functions).
 *
 * Episode marks map onto episode states: `trained` → state 'trained'; excluded or dropped train episodes →
 * 'discarded' with the reason in `abort_reason` (the column that says why an episode was not trained on).
 * Eval and aborted episodes keep their state: they were never candidates.
 */
import type { Database } from 'better-sqlite3';
import { toMergeCalls } from '../../common/timeline/call.ts';
import { getCalls } from '../store/episode-reads.ts';
import { updateEpisodeState } from '../store/episodes.ts';
import { getTrainingTimelines } from '../store/timelines.ts';
import { pendingTrainEpisodes } from '../store/episode-recovery.ts';
import {
  insertTrainStep,
  latestPolicyRestore,
  latestStandingTrainStep,
  latestTrainStep,
  listTrainSteps,
  maxPolicyVersion,
  recordTrainStep,
  revertTrainSteps,
  stepSummary,
} from '../store/train-steps.ts';
import {
  discardEpisodesBefore,
  insertRun,
  insertRunEvent,
  latestRunOfModel,
  nextRunNumbers,
  setRunWarnings,
  updateRunConfig,
  updateRunStatus,
} from '../store/training-runs.ts';
import type { EpisodeMark } from './batcher.ts';
import type { TrainingStore } from './store-port.ts';

/** Marks that leave the episode's state alone. */
const KEEP_STATE: ReadonlySet<EpisodeMark['disposition']> = new Set(['ignored-eval', 'ignored-aborted']);

export function sqliteTrainingStore(db: Database): TrainingStore {
  return {
    runs: {
      latest: (model) => latestRunOfModel(db, model) ?? null,
      nextNumbers: (model) => nextRunNumbers(db, model),
      create: (run) => insertRun(db, run),
      setStatus: (id, status) => updateRunStatus(db, id, status),
      setConfig: (id, config, hash) => updateRunConfig(db, id, config, hash),
      setWarnings: (id, warnings) => setRunWarnings(db, id, warnings),
      addEvent: (event) => insertRunEvent(db, event),
      discardEpisodesBefore: (model, before, reason) => discardEpisodesBefore(db, model, before, reason),
    },
    lastStep(model) {
      const last = latestTrainStep(db, model);
      return last ? { step: last.step, policyVersion: last.policyVersion } : null;
    },
    insertStep(summary) {
      const { model, step, policyVersion, time, runId, ...rest } = summary;
      insertTrainStep(db, { model, step, policyVersion, createdAt: time, runId, metrics: { ...rest } });
    },
    recordStep(summary, episodeIds) {
      const { model, step, policyVersion, time, runId, ...rest } = summary;
      recordTrainStep(db, { model, step, policyVersion, createdAt: time, runId, metrics: { ...rest } }, episodeIds);
    },
    history(model, afterStep = 0) {
      const standing = latestStandingTrainStep(db, model, afterStep);
      const restore = latestPolicyRestore(db, model);
      return {
        lastStep: latestTrainStep(db, model)?.step ?? 0,
        standing: standing ? { step: standing.step, policyVersion: standing.policyVersion } : null,
        restore: restore ? { policyVersion: restore.policyVersion, checkpointStep: restore.checkpointStep } : null,
        maxPolicyVersion: maxPolicyVersion(db, model),
      };
    },
    revertSteps(model, restore) {
      return revertTrainSteps(db, { model, ...restore, createdAt: new Date().toISOString() });
    },
    pendingEpisodes(model) {
      return pendingTrainEpisodes(db, model);
    },
    listSteps(model, options) {
      return listTrainSteps(db, model, options).map(stepSummary);
    },
    episodeCalls(episodeId) {
      return toMergeCalls(getCalls(db, episodeId));
    },
    episodeTimelines(episodeId) {
      return getTrainingTimelines(db, episodeId);
    },
    markEpisodes(marks) {
      db.transaction(() => {
        for (const mark of marks) {
          if (KEEP_STATE.has(mark.disposition)) continue;
          if (mark.disposition === 'trained') updateEpisodeState(db, mark.episodeId, { state: 'trained' });
          else updateEpisodeState(db, mark.episodeId, { state: 'discarded', abortReason: `${mark.disposition}: ${mark.detail}` });
        }
      })();
    },
  };
}
