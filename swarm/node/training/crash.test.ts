/**
 * Crash consistency: a peer in a child process is killed with SIGKILL between checkpoints, with a step recorded
 * after the last checkpoint, a group's episodes queued in memory and an episode in flight; a checkpoint of a step
 * that never got recorded is left behind too (the crash between a checkpoint's rename and the step's record). The
 * restarted peer (in this process, to read its store and loop) must hold the invariant: every acknowledged train
 * episode is trained in exactly one standing step, or marked with a reason, or queued again; no row stays active;
 * step numbers and policy versions never go back and no version names two sets of weights.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NamedTensors } from '../../../worker/common/engine.ts';
import { PeerRuntime, type PeerOptions } from '../runtime.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../p2p/testing/runtime-processes.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { PEER_RESTARTED } from '../store/episode-recovery.ts';
import { policyRestoreRows, trainEpisodeRows } from '../store/testing/inspect.ts';
import { listTrainSteps, stepsOfEpisode, trainStepEpisodes } from '../store/train-steps.ts';
import { CHECKPOINT_META, checkpointsDir, readCheckpointWeights } from './checkpoints.ts';
import { chatOnce, listenSteps, runSeededEpisode, startSeededEpisode } from './testing/process-agent.ts';
import { runEpisode } from './testing/peer-agent.ts';

const TRAINING = { batchTasks: 2, groupSize: 2, checkpointEvery: 2, maxPolicyLag: 10, train: { learningRate: 1e-3 } };
// After the restart: four groups to a batch, so that the three re-queued groups wait and the restored state can be read.
const RESTARTED = { ...TRAINING, batchTasks: 4 };

const folders: string[] = [];
const peers: RuntimeProcess[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) await peer.kill();
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function options(dataDir: string, config: object): PeerOptions {
  return {
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    training: { config },
  };
}

function same(a: NamedTensors, b: NamedTensors): boolean {
  return Object.keys(a).every((name) => a[name].data.every((x, i) => x === b[name].data[i]));
}

function policyRestores(db: Database): { policy_version: number; checkpoint_step: number }[] {
  return policyRestoreRows(db, 'tiny');
}

/** The invariant over every acknowledged (ended, rewarded) train episode of the model, and no active row. */
function expectConsistent(db: Database, queued: ReadonlySet<string>): void {
  const rows = trainEpisodeRows(db, 'tiny');
  for (const row of rows) {
    const steps = stepsOfEpisode(db, row.id);
    if (row.state === 'trained') expect(steps, row.id).toHaveLength(1);
    else if (row.state === 'discarded') expect([steps.length, row.abort_reason !== null], row.id).toEqual([0, true]);
    else if (row.state === 'ended') expect([steps.length, queued.has(row.id)], row.id).toEqual([0, true]);
    else expect(row, row.id).toMatchObject({ state: 'aborted', abort_reason: expect.any(String) });
  }
}

describe('a peer killed between checkpoints', () => {
  it('restarts consistent: lost steps reverted and re-queued, queue rebuilt, orphans aborted, fresh version', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-crash-'));
    folders.push(dataDir);
    const ckptDir = checkpointsDir(dataDir, 'tiny');

    // Steps 1-3 (a checkpoint at 2), one more group ended and queued, one episode in flight: then SIGKILL.
    const peer = await startRuntimeProcess(options(dataDir, TRAINING));
    peers.push(peer);
    const events = listenSteps(peer);
    await events.opened;
    const stepEpisodes: string[][] = [];
    for (let step = 1; step <= 3; step++) {
      const ids: string[] = [];
      for (const [i, [task, reward]] of ([['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const).entries()) ids.push(await runSeededEpisode(peer, task, reward, 100 * step + i));
      await events.step(step);
      stepEpisodes.push(ids);
    }
    const queuedGroup = [await runSeededEpisode(peer, 'task-c', 1, 900), await runSeededEpisode(peer, 'task-c', 0, 901)];
    const inFlight = await startSeededEpisode(peer, 'task-e', 902);
    await chatOnce(inFlight, [{ role: 'user', content: 'hello' }]);
    events.close();
    await peer.kill();
    expect(existsSync(join(ckptDir, 'step-2', CHECKPOINT_META))).toBe(true);
    expect(existsSync(join(ckptDir, 'step-3'))).toBe(false);
    // The moment between a checkpoint's rename and its step's record: step 4's checkpoint, no step 4.
    cpSync(join(ckptDir, 'step-2'), join(ckptDir, 'step-4'), { recursive: true });
    const meta = JSON.parse(readFileSync(join(ckptDir, 'step-4', CHECKPOINT_META), 'utf8')) as { step: number; policyVersion: number };
    writeFileSync(join(ckptDir, 'step-4', CHECKPOINT_META), JSON.stringify({ ...meta, step: 4, policyVersion: 4 }));

    let runtime = await PeerRuntime.start(options(dataDir, RESTARTED));
    try {
      const { db } = runtime;
      const model = runtime.serving.models.find('tiny')!;
      // Step 3's update died with the process: the weights are step 2's, under a version never used before.
      expect(existsSync(join(ckptDir, 'step-4'))).toBe(false);
      expect(same(await model.engine.getWeights(), await readCheckpointWeights(join(ckptDir, 'step-2')))).toBe(true);
      expect([model.step, model.policyVersion]).toEqual([3, 4]);
      const steps = listTrainSteps(db, 'tiny');
      expect(steps.map((s) => [s.step, s.policyVersion, s.revertedAt !== null])).toEqual([[1, 1, false], [2, 2, false], [3, 3, true]]);
      expect(policyRestores(db)).toEqual([{ policy_version: 4, checkpoint_step: 2 }]);
      expect(trainStepEpisodes(db, 'tiny', 3).sort()).toEqual([...stepEpisodes[2]].sort());
      for (const id of stepEpisodes[2]) expect(getEpisode(db, id)!.state).toBe('ended');
      for (const id of [...stepEpisodes[0], ...stepEpisodes[1]]) expect(getEpisode(db, id)!.state).toBe('trained');
      expect(getEpisode(db, inFlight.episodeId)).toMatchObject({ state: 'aborted', abortReason: PEER_RESTARTED });
      // The rebuilt queue: step 3's two groups and task-c's.
      expect(runtime.training.loop('tiny').state()).toMatchObject({ completeGroups: 3, queuedEpisodes: 0 });
      expectConsistent(db, new Set([...stepEpisodes[2], ...queuedGroup]));
    } finally {
      await runtime.stop();
    }

    // Stopped again before any step: the same weights keep the same version, and no new one is taken.
    runtime = await PeerRuntime.start(options(dataDir, RESTARTED));
    try {
      const { db } = runtime;
      const model = runtime.serving.models.find('tiny')!;
      expect([model.step, model.policyVersion]).toEqual([3, 4]);
      expect(policyRestores(db)).toHaveLength(1);
      const loop = runtime.training.loop('tiny');
      expect(loop.state()).toMatchObject({ completeGroups: 3 });

      // A fourth group fills the batch: step 4 trains the re-queued episodes once, under the next fresh version.
      const last = [await runEpisode(runtime, 'task-d', 1), await runEpisode(runtime, 'task-d', 0)];
      await loop.whenSettled();
      expect([model.step, model.policyVersion]).toEqual([4, 5]);
      const steps = listTrainSteps(db, 'tiny');
      expect(steps.map((s) => [s.step, s.policyVersion, s.revertedAt !== null])).toEqual([[1, 1, false], [2, 2, false], [3, 3, true], [4, 5, false]]);
      expect(trainStepEpisodes(db, 'tiny', 4).sort()).toEqual([...stepEpisodes[2], ...queuedGroup, ...last].sort());
      for (const id of stepEpisodes[2]) expect(stepsOfEpisode(db, id)).toEqual([{ model: 'tiny', step: 4 }]);
      expectConsistent(db, new Set());
      const versions = [...steps.map((s) => s.policyVersion), ...policyRestores(db).map((r) => r.policy_version)];
      expect(new Set(versions).size).toBe(versions.length);
    } finally {
      await runtime.stop();
    }

    // A clean restart after a checkpointed step continues exactly there.
    runtime = await PeerRuntime.start(options(dataDir, RESTARTED));
    try {
      const model = runtime.serving.models.find('tiny')!;
      expect([model.step, model.policyVersion]).toEqual([4, 5]);
      expect(same(await model.engine.getWeights(), await readCheckpointWeights(join(ckptDir, 'step-4')))).toBe(true);
      expect(policyRestores(runtime.db)).toHaveLength(1);
    } finally {
      await runtime.stop();
    }
  });

  it('a clean stop writes the checkpoint its last step lacks, so the restart reverts nothing', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-clean-stop-'));
    folders.push(dataDir);
    const config = { ...TRAINING, checkpointEvery: 5 };
    let runtime = await PeerRuntime.start(options(dataDir, config));
    let weights: NamedTensors;
    try {
      for (const [task, reward] of [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const) await runEpisode(runtime, task, reward);
      await runtime.training.loop('tiny').whenSettled();
      expect(existsSync(join(checkpointsDir(dataDir, 'tiny'), 'step-1'))).toBe(false);
      weights = await runtime.serving.models.find('tiny')!.engine.getWeights();
    } finally {
      await runtime.stop();
    }
    runtime = await PeerRuntime.start(options(dataDir, config));
    try {
      const model = runtime.serving.models.find('tiny')!;
      expect([model.step, model.policyVersion]).toEqual([1, 1]);
      expect(same(await model.engine.getWeights(), weights)).toBe(true);
      expect(policyRestores(runtime.db)).toEqual([]);
      expect(listTrainSteps(runtime.db, 'tiny').map((s) => s.revertedAt)).toEqual([null]);
    } finally {
      await runtime.stop();
    }
  });
});
