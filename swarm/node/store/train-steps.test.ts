/** Train steps with their episodes, reverted steps and restored versions, on a real SQLite store. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from 'better-sqlite3';
import { insertEpisode } from './episodes.ts';
import { getEpisode } from './episode-reads.ts';
import { abortOrphanedEpisodes, PEER_RESTARTED, pendingTrainEpisodes } from './episode-recovery.ts';
import { storeEndedEpisode, tempStore } from './testing/episodes.ts';
import {
  latestPolicyRestore,
  latestStandingTrainStep,
  listTrainSteps,
  maxPolicyVersion,
  recordTrainStep,
  revertTrainSteps,
  stepsOfEpisode,
  trainStepEpisodes,
  type TrainStep,
} from './train-steps.ts';

let store: ReturnType<typeof tempStore>;
let db: Database;
beforeEach(() => {
  store = tempStore('train-steps');
  db = store.db;
});
afterEach(() => store.close());

const step = (n: number, policyVersion = n): TrainStep => ({ model: 'm', step: n, policyVersion, metrics: { loss: n }, createdAt: `2026-01-01T00:0${n}:00Z` });

describe('train steps and their episodes', () => {
  it('records a step, its episodes and their trained state together, or nothing', () => {
    for (const id of ['ep01', 'ep02', 'ep03']) storeEndedEpisode(db, id, 'm', 'task', 'client');
    recordTrainStep(db, step(1), ['ep01', 'ep02']);
    expect(trainStepEpisodes(db, 'm', 1)).toEqual(['ep01', 'ep02']);
    expect(getEpisode(db, 'ep01')!.state).toBe('trained');
    expect(stepsOfEpisode(db, 'ep01')).toEqual([{ model: 'm', step: 1 }]);

    // The step number is taken: the transaction writes nothing, ep03 stays queued.
    expect(() => recordTrainStep(db, step(1), ['ep03'])).toThrow(expect.objectContaining({ name: 'TrainStepExistsError' }));
    expect(getEpisode(db, 'ep03')!.state).toBe('ended');
    expect(stepsOfEpisode(db, 'ep03')).toEqual([]);
    expect(pendingTrainEpisodes(db, 'm').map((e) => e.episodeId)).toEqual(['ep03']);
  });

  it('reverts the steps after a checkpoint: episodes queued again, a fresh version recorded and never reused', () => {
    for (const id of ['ep01', 'ep02', 'ep03', 'ep04']) storeEndedEpisode(db, id, 'm', 'task', 'client');
    recordTrainStep(db, step(1), ['ep01']);
    recordTrainStep(db, step(2), ['ep02']);
    recordTrainStep(db, step(3), ['ep03']);
    expect(maxPolicyVersion(db, 'm')).toBe(3);

    const reverted = revertTrainSteps(db, { model: 'm', policyVersion: 4, checkpointStep: 1, afterStep: 3, createdAt: '2026-01-02T00:00:00Z' });
    expect(reverted).toEqual({ steps: [2, 3], episodeIds: ['ep02', 'ep03'] });
    expect(listTrainSteps(db, 'm').map((s) => [s.step, s.revertedAt])).toEqual([[1, null], [2, '2026-01-02T00:00:00Z'], [3, '2026-01-02T00:00:00Z']]);
    expect(latestStandingTrainStep(db, 'm')).toMatchObject({ step: 1 });
    expect(latestPolicyRestore(db, 'm')).toMatchObject({ policyVersion: 4, checkpointStep: 1, afterStep: 3 });
    expect(maxPolicyVersion(db, 'm')).toBe(4);
    expect(pendingTrainEpisodes(db, 'm').map((e) => e.episodeId)).toEqual(['ep02', 'ep03', 'ep04']);
    expect(stepsOfEpisode(db, 'ep02')).toEqual([]);

    // Trained again later: one standing step names it.
    recordTrainStep(db, step(4, 5), ['ep02']);
    expect(stepsOfEpisode(db, 'ep02')).toEqual([{ model: 'm', step: 4 }]);
    expect(() => revertTrainSteps(db, { model: 'm', policyVersion: 4, checkpointStep: 4, afterStep: 4, createdAt: '' })).toThrow(expect.objectContaining({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' }));
  });

  it('aborts the rows left active by a dead process, of one model or all', () => {
    for (const [id, model] of [['a1', 'm'], ['a2', 'm'], ['b1', 'other']] as const) insertEpisode(db, { id, model, taskId: 't', kind: 'train', policyVersion: 0 });
    storeEndedEpisode(db, 'ep01', 'm', 'task', 'client');
    expect(abortOrphanedEpisodes(db, { model: 'm', endedAt: '2026-01-03T00:00:00Z' }).sort()).toEqual(['a1', 'a2']);
    expect(getEpisode(db, 'a1')).toMatchObject({ state: 'aborted', abortReason: PEER_RESTARTED, endedAt: '2026-01-03T00:00:00Z' });
    expect(getEpisode(db, 'b1')!.state).toBe('active');
    expect(getEpisode(db, 'ep01')!.state).toBe('ended');
    expect(abortOrphanedEpisodes(db)).toEqual(['b1']);
    expect(abortOrphanedEpisodes(db)).toEqual([]);
  });
});
