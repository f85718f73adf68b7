/**
 * A step that fails and a checkpoint that cannot be written, on a real peer (SQLite, builtin:tiny in its worker
 * thread). The failures are real ones: the engine refuses a stored timeline whose token lies outside the vocabulary
 * (the row is altered in SQLite, as a damaged store would hold it), and the checkpoint folder's place is taken by a
 * file. Decisions (loop.ts): a failed step records nothing, marks its episodes `dropped-step-failed` with the step,
 * and stops the loop (`failed`, lastError) until it is started again; a failed checkpoint leaves the step recorded
 * and served but says it is not resumable (`lastCheckpointError`), training goes on and the next step retries.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TrainStepSummary } from '../../common/api.ts';
import type { NamedTensors } from '../../../worker/common/engine.ts';
import { PeerRuntime } from '../runtime.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { corruptLastTimelineToken } from '../store/testing/inspect.ts';
import { listTrainSteps, trainStepEpisodes } from '../store/train-steps.ts';
import { checkpointsDir, latestCheckpoint } from './checkpoints.ts';
import { get, post, runEpisode } from './testing/peer-agent.ts';

/** Outside builtin:tiny's 264-token vocabulary. */
const NOT_A_TOKEN = 100_000;

const folders: string[] = [];
afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function startPeer(checkpointEvery: number): Promise<{ runtime: PeerRuntime; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-training-failures-'));
  folders.push(dataDir);
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    training: { config: { batchTasks: 2, groupSize: 2, checkpointEvery, train: { learningRate: 1e-3 } } },
  });
  return { runtime, dataDir };
}

const BATCH = [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const;

async function trainOneStep(runtime: PeerRuntime): Promise<string[]> {
  const ids: string[] = [];
  for (const [task, reward] of BATCH) ids.push(await runEpisode(runtime, task, reward));
  await runtime.training.loop('tiny').whenSettled();
  return ids;
}

function same(a: NamedTensors, b: NamedTensors): boolean {
  return Object.keys(a).every((name) => a[name].data.every((x, i) => x === b[name].data[i]));
}

describe('training failures', () => {
  it('a failed step records nothing, marks its episodes with the step and why, and training starts again', async () => {
    const { runtime } = await startPeer(1);
    try {
      const { db } = runtime;
      const model = runtime.serving.models.find('tiny')!;
      const loop = runtime.training.loop('tiny');
      const before = await model.engine.getWeights();
      const ids = [await runEpisode(runtime, 'task-a', 1)];
      corruptLastTimelineToken(db, ids[0], NOT_A_TOKEN);
      for (const [task, reward] of BATCH.slice(1)) ids.push(await runEpisode(runtime, task, reward));
      await loop.whenSettled();

      expect(loop.status).toBe('failed');
      expect(loop.lastError).toMatch(/^InvalidSampleError: /);
      expect((await get(runtime, '/api/models/tiny/training')).body).toMatchObject({ status: 'failed', step: 0, policyVersion: 0 });
      expect(listTrainSteps(db, 'tiny')).toEqual([]);
      expect(same(await model.engine.getWeights(), before)).toBe(true);
      for (const id of ids) expect(getEpisode(db, id)).toMatchObject({ state: 'discarded', abortReason: expect.stringMatching(/^dropped-step-failed: step 1: InvalidSampleError/) });
      // The model serves again: new episodes are admitted while the loop waits to be started.
      expect(model.state).toBe('idle');

      expect((await post(runtime, '/api/models/tiny/training', { action: 'start' })).body).toMatchObject({ status: 'running', lastError: null });
      const trained = await trainOneStep(runtime);
      expect([model.step, model.policyVersion, loop.status]).toEqual([1, 1, 'running']);
      expect(trainStepEpisodes(db, 'tiny', 1).sort()).toEqual([...trained].sort());
    } finally {
      await runtime.stop();
    }
  });

  it('a failed checkpoint keeps the step, says it is not resumable, and the next step writes it', async () => {
    const { runtime, dataDir } = await startPeer(2);
    const dir = checkpointsDir(dataDir, 'tiny');
    try {
      const loop = runtime.training.loop('tiny');
      // A file where the model's checkpoint folder goes: every checkpoint write fails until it is gone.
      mkdirSync(dirname(dir), { recursive: true });
      writeFileSync(dir, 'not a folder');
      await trainOneStep(runtime);
      expect(loop.state().lastCheckpointError).toBeNull(); // step 1: no checkpoint due
      await trainOneStep(runtime);
      expect(loop.state()).toMatchObject({ status: 'running', step: 2, policyVersion: 2, lastCheckpointError: { step: 2, code: 'ENOTDIR' } });
      let steps = (await get(runtime, '/api/models/tiny/steps')).body.steps as TrainStepSummary[];
      expect(steps.map((s) => [s.step, s.checkpoint])).toEqual([[1, null], [2, null]]);

      rmSync(dir);
      // Step 3 is not a multiple of checkpointEvery, but a checkpoint is owed.
      await trainOneStep(runtime);
      expect(loop.state()).toMatchObject({ step: 3, lastCheckpointError: null });
      steps = (await get(runtime, '/api/models/tiny/steps')).body.steps as TrainStepSummary[];
      expect(steps[2].checkpoint).toBe(join(dir, 'step-3'));
      expect(latestCheckpoint(dir)).toMatchObject({ meta: { step: 3, policyVersion: 3 } });
    } finally {
      await runtime.stop();
    }
  });
});
