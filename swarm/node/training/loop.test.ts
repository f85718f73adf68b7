/**
 * The training loop on a real peer: PeerRuntime (SQLite store, HTTP), the model host with builtin:tiny in a worker
 * thread, episodes and the gateway driven over HTTP the way an agent and its runner drive them. Each test has its
 * own data folder and makes the history it needs (steps, checkpoints), so any one runs alone.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { CheckpointInfo, ServerEvent, TrainStepSummary } from '../../common/api.ts';
import type { NamedTensors } from '../../../worker/common/engine.ts';
import type { EngineState, HostedModel } from '../models/model-host.ts';
import { PeerRuntime } from '../runtime.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { checkpointsDir, CHECKPOINT_META } from './checkpoints.ts';
import type { TrainingService } from './service.ts';
import { checkpointsCommand } from '../cli/checkpoints-command.ts';
import { chat, get, post, runEpisode, startEpisode } from './testing/peer-agent.ts';

const TRAINING = { batchTasks: 2, groupSize: 2, checkpointEvery: 1, train: { learningRate: 1e-3 } };

const folders: string[] = [];
afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  folders.push(dir);
  return dir;
}

async function startPeer(dataDir: string): Promise<{ runtime: PeerRuntime; training: TrainingService }> {
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 16 }],
    training: { config: TRAINING },
  });
  return { runtime, training: runtime.training };
}

function differs(a: NamedTensors, b: NamedTensors): boolean {
  return Object.keys(a).some((name) => a[name].data.some((x, i) => x !== b[name].data[i]));
}

function listenEvents(runtime: PeerRuntime): { events: ServerEvent[]; close: () => void; open: Promise<void> } {
  const ws = new WebSocket(`ws://127.0.0.1:${runtime.port}/api/events?token=${runtime.token}`);
  const events: ServerEvent[] = [];
  ws.on('message', (data) => events.push(JSON.parse(String(data)) as ServerEvent));
  return { events, close: () => ws.close(), open: new Promise((resolve) => ws.once('open', () => resolve())) };
}

/** One batch (two tasks, rewards that differ within each) and the step it fills; resolves when the step is done. */
async function trainOneStep(runtime: PeerRuntime, training: TrainingService): Promise<void> {
  for (const [task, reward] of [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const) await runEpisode(runtime, task, reward);
  await training.loop('tiny').whenSettled();
}

/** Resolves when the model is in `state` (at once if it is already). */
function whenState(model: HostedModel, state: EngineState): Promise<void> {
  if (model.state === state) return Promise.resolve();
  return new Promise((resolve) => {
    const off = model.onStateChange((s) => {
      if (s !== state) return;
      off();
      resolve();
    });
  });
}

describe('training loop on a real peer', () => {
  it('trains on finished groups: drain, update, new policy version, metrics stored and broadcast, checkpoint', async () => {
    const dataDir = tempDir('agentjet-training-');
    const { runtime, training } = await startPeer(dataDir);
    try {
      const model = runtime.serving.models.find('tiny')!;
      const loop = training.loop('tiny');
      const states: EngineState[] = [model.state];
      model.onStateChange((state) => states.push(state));
      const listener = listenEvents(runtime);
      await listener.open;
      const before = await model.engine.getWeights();

      const trained = [
        await runEpisode(runtime, 'task-a', 1, { success: true }),
        await runEpisode(runtime, 'task-a', 0, { success: false }),
        await runEpisode(runtime, 'task-b', 0.2),
      ];
      const evalEpisode = await runEpisode(runtime, 'task-b', 5, { kind: 'eval', success: true });
      const uniform = [await runEpisode(runtime, 'task-u', 1), await runEpisode(runtime, 'task-u', 1)];
      expect(model.step).toBe(0);

      // One episode is still in flight when the batch fills: the model drains and waits for it.
      const straggler = await startEpisode(runtime, 'task-c');
      await chat(straggler, [{ role: 'user', content: 'hello' }]);
      trained.push(await runEpisode(runtime, 'task-b', 0.8, { success: false }));
      await whenState(model, 'draining');
      const refused = await post(runtime, '/swarm/v1/episodes', { model: 'tiny', taskId: 'task-d' });
      expect(refused.status).toBe(503);
      expect(model.step).toBe(0);

      // The straggler is aborted; the drain completes and the update runs.
      const aborted = await post(runtime, `/swarm/v1/episodes/${straggler.episodeId}/abort`, { reason: 'gave up' });
      expect(aborted.status, JSON.stringify(aborted.body)).toBe(200);
      await loop.whenSettled();
      const late = await post(runtime, `/swarm/v1/episodes/${straggler.episodeId}/end`, { reward: 1 });
      expect(late.status).toBe(409);
      expect(late.body.error!.name).toBe('ConflictError');

      expect(states.slice(0, 2)).toEqual(['idle', 'rolling']);
      expect(states.slice(-4)).toEqual(['rolling', 'draining', 'updating', 'idle']);
      expect(model.step).toBe(1);
      expect(model.policyVersion).toBe(1);
      expect(differs(before, await model.engine.getWeights())).toBe(true);

      const steps = (await get(runtime, '/api/models/tiny/steps')).body.steps as TrainStepSummary[];
      expect(steps).toHaveLength(1);
      expect(steps[0]).toMatchObject({ model: 'tiny', step: 1, policyVersion: 1, groups: 2, episodes: 4 });
      // Rewards 1, 0 (task-a) and 0.2, 0.8 (task-b): mean 0.5, spread √0.17.
      expect(steps[0].rewardMean).toBeCloseTo(0.5, 6);
      expect(steps[0].rewardStd).toBeCloseTo(Math.sqrt(0.17), 6);
      // Success is the episodes' own flag: one of four said so (the one without a flag counts as not successful).
      expect(steps[0].successRate).toBe(0.25);
      expect(steps[0].naiveTokens).toBeGreaterThanOrEqual(steps[0].metrics.tokens);
      expect(Number.isFinite(steps[0].metrics.loss)).toBe(true);
      expect(steps[0].metrics.trainedTokens).toBeGreaterThan(0);
      expect(listener.events.filter((e) => e.type === 'train-step').map((e) => e.data)).toEqual(steps);
      listener.close();

      for (const id of trained) expect(getEpisode(runtime.db, id)!.state).toBe('trained');
      expect(getEpisode(runtime.db, evalEpisode)!.state).toBe('ended');
      for (const id of uniform) expect(getEpisode(runtime.db, id)).toMatchObject({ state: 'discarded', abortReason: expect.stringMatching(/^excluded-uniform-reward/) });
      expect(getEpisode(runtime.db, straggler.episodeId)!.state).toBe('aborted');

      const checkpoint = join(checkpointsDir(dataDir, 'tiny'), 'step-1');
      expect(existsSync(join(checkpoint, CHECKPOINT_META))).toBe(true);
      expect(steps[0].checkpoint).toBe(checkpoint);

      // New episodes sample the new policy.
      const next = await startEpisode(runtime, 'task-a');
      expect(next.policyVersion).toBe(1);
    } finally {
      await runtime.stop();
    }
  });

  it('resumes after a restart: checkpoint weights loaded, step and policy version continue', async () => {
    const dataDir = tempDir('agentjet-training-resume-');
    let weightsAfterFirstStep: NamedTensors;
    const first = await startPeer(dataDir);
    try {
      await trainOneStep(first.runtime, first.training);
      weightsAfterFirstStep = await first.runtime.serving.models.find('tiny')!.engine.getWeights();
    } finally {
      await first.runtime.stop();
    }

    const { runtime, training } = await startPeer(dataDir);
    try {
      const model = runtime.serving.models.find('tiny')!;
      expect(model.step).toBe(1);
      expect(model.policyVersion).toBe(1);
      expect(differs(await model.engine.getWeights(), weightsAfterFirstStep)).toBe(false);
      expect((await get(runtime, '/api/models/tiny/training')).body).toMatchObject({ status: 'running', step: 1, policyVersion: 1 });

      await trainOneStep(runtime, training);
      expect(model.step).toBe(2);
      expect(model.policyVersion).toBe(2);
      const steps = (await get(runtime, '/api/models/tiny/steps')).body.steps as TrainStepSummary[];
      expect(steps.map((s) => s.step)).toEqual([1, 2]);
    } finally {
      await runtime.stop();
    }
  });

  it('lists the checkpoints and exports one as a tar archive that tar extracts to the same files', async () => {
    const dataDir = tempDir('agentjet-training-checkpoints-');
    const { runtime, training } = await startPeer(dataDir);
    const out = tempDir('agentjet-checkpoint-export-');
    try {
      await trainOneStep(runtime, training);
      await trainOneStep(runtime, training);
      const { checkpoints } = (await get(runtime, '/api/models/tiny/checkpoints')).body as { checkpoints: CheckpointInfo[] };
      expect(checkpoints.map((c) => [c.step, c.policyVersion])).toEqual([[2, 2], [1, 1]]);

      const res = await fetch(`http://127.0.0.1:${runtime.port}/api/models/tiny/checkpoints/2/archive`, { headers: { authorization: `Bearer ${runtime.token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-disposition')).toBe('attachment; filename="tiny-step-2.tar"');
      const archive = Buffer.from(await res.arrayBuffer());
      expect(archive.length).toBe(Number(res.headers.get('content-length')));
      writeFileSync(join(out, 'checkpoint.tar'), archive);
      execFileSync('tar', ['-xf', join(out, 'checkpoint.tar'), '-C', out]);
      const folder = checkpoints[0].dir;
      for (const file of readdirSync(folder)) expect(readFileSync(join(out, 'tiny-step-2', file)).equals(readFileSync(join(folder, file)))).toBe(true);
      expect(readdirSync(join(out, 'tiny-step-2')).sort()).toEqual(readdirSync(folder).sort());

      // The CLI saves the same archive.
      const viaCli = join(out, 'cli.tar');
      expect(await checkpointsCommand.run({ 'data-dir': dataDir, out: viaCli }, ['export', 'tiny', '2'])).toBe(0);
      expect(readFileSync(viaCli).equals(archive)).toBe(true);
      const refused = join(out, 'refused.tar');
      await expect(checkpointsCommand.run({ 'data-dir': dataDir, out: refused }, ['export', 'tiny', '7'])).rejects.toMatchObject({ name: 'PeerRequestError', status: 404 });
      expect(readdirSync(out).filter((f) => f.startsWith('refused'))).toEqual([]);

      const missing = await get(runtime, '/api/models/tiny/checkpoints/7/archive');
      expect(missing).toMatchObject({ status: 404, body: { error: { name: 'NotFoundError' } } });
      expect((await get(runtime, '/api/models/tiny/checkpoints/latest/archive')).status).toBe(400);
      expect((await get(runtime, '/api/models/nope/checkpoints')).status).toBe(404);
    } finally {
      await runtime.stop();
    }
  });

  it('pauses and starts through the control API, and refuses bad actions and unknown models', async () => {
    const { runtime, training } = await startPeer(tempDir('agentjet-training-pause-'));
    try {
      const model = runtime.serving.models.find('tiny')!;
      expect((await post(runtime, '/api/models/tiny/training', { action: 'pause' })).body).toMatchObject({ status: 'paused' });
      for (const [task, reward] of [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const) await runEpisode(runtime, task, reward);
      expect(model.step).toBe(0);
      expect((await get(runtime, '/api/models/tiny/training')).body).toMatchObject({ status: 'paused', completeGroups: 2 });

      const bad = await post(runtime, '/api/models/tiny/training', { action: 'explode' });
      expect(bad.status).toBe(400);
      expect(bad.body.error!.name).toBe('InvalidRequestError');
      const unknown = await post(runtime, '/api/models/nope/training', { action: 'start' });
      expect(unknown.status).toBe(404);

      // Starting again picks up the batch that filled while paused.
      expect((await post(runtime, '/api/models/tiny/training', { action: 'start' })).status).toBe(200);
      await training.loop('tiny').whenSettled();
      expect(model.step).toBe(1);
      // No episode reported a success flag: the step has no success figure rather than one made up from rewards.
      const steps = (await get(runtime, '/api/models/tiny/steps')).body.steps as TrainStepSummary[];
      expect(steps[0].successRate).toBeNull();
    } finally {
      await runtime.stop();
    }
  });
});
