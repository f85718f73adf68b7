/**
 * Training runs on a real peer (SQLite store, builtin:tiny in a worker thread, episodes over HTTP): a restart with
 * the same settings continues the run, other settings start a new run that continues the weights, `--new-run`
 * starts from the source weights with its own step numbers, a live change is an event on the curve, a crash leaves
 * the run `crashed` until it continues, and uniform groups raise the discarded-share warning.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunStep } from '../../common/api.ts';
import type { RunDetail, RunSummary } from '../../common/runs-api.ts';
import { PeerRuntime, type PeerOptions } from '../runtime.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { get, runEpisode } from './testing/peer-agent.ts';

const TRAINING = { batchTasks: 2, groupSize: 2, checkpointEvery: 1, train: { learningRate: 1e-3 } };

const folders: string[] = [];
afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-runs-'));
  folders.push(dir);
  return dir;
}

function startPeer(dataDir: string, training: PeerOptions['training'] = { config: TRAINING }): Promise<PeerRuntime> {
  return PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 16 }],
    training,
  });
}

/** One batch whose groups have rewards that differ: one step. */
async function trainOneStep(runtime: PeerRuntime): Promise<void> {
  for (const [task, reward] of [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const) await runEpisode(runtime, task, reward);
  await runtime.training.loop('tiny').whenSettled();
}

async function api<T>(runtime: PeerRuntime, path: string): Promise<T> {
  const answer = await get(runtime, path);
  expect(answer.status).toBe(200);
  return answer.body as T;
}

async function runs(runtime: PeerRuntime): Promise<RunSummary[]> {
  return (await api<{ runs: RunSummary[] }>(runtime, '/api/runs')).runs;
}

describe('training runs', () => {
  it('continues the run after a restart with the same settings, and numbers its steps on', async () => {
    const dataDir = tempDir();
    let runtime = await startPeer(dataDir);
    try {
      await trainOneStep(runtime);
    } finally {
      await runtime.stop();
    }
    runtime = await startPeer(dataDir);
    try {
      await trainOneStep(runtime);
      const [run, ...others] = await runs(runtime);
      expect(others).toEqual([]);
      expect(run).toMatchObject({ id: 'tiny-1', status: 'running', steps: 2, lastStep: 2 });
      const detail = await api<RunDetail>(runtime, `/api/runs/${run.id}`);
      expect(detail.events.map((e) => e.kind)).toEqual(expect.arrayContaining(['start', 'resume', 'stop', 'checkpoint']));
      expect(detail.config).toMatchObject({ batchTasks: 2, groupSize: 2, train: { learningRate: 1e-3 } });
      expect(detail.changedFromDefaults).toEqual(expect.arrayContaining(['batchTasks', 'groupSize', 'train.learningRate', 'checkpointEvery']));
      const { steps } = await api<{ steps: RunStep[] }>(runtime, `/api/runs/${run.id}/steps`);
      expect(steps.map((s) => [s.runStep, s.runId])).toEqual([
        [1, 'tiny-1'],
        [2, 'tiny-1'],
      ]);
    } finally {
      await runtime.stop();
    }
  });

  it('starts a new run on other settings, continuing the weights, with the change as an event', async () => {
    const dataDir = tempDir();
    let runtime = await startPeer(dataDir);
    try {
      await trainOneStep(runtime);
    } finally {
      await runtime.stop();
    }
    runtime = await startPeer(dataDir, { config: { ...TRAINING, train: { learningRate: 3e-4 } } });
    try {
      await trainOneStep(runtime);
      const [newest, first] = await runs(runtime);
      expect(first).toMatchObject({ id: 'tiny-1', status: 'stopped', steps: 1 });
      expect(newest).toMatchObject({ id: 'tiny-2', status: 'running', steps: 1, lastStep: 2, start: { kind: 'continued', parentId: 'tiny-1', checkpointStep: 1 } });
      const detail = await api<RunDetail>(runtime, '/api/runs/tiny-2');
      const change = detail.events.find((e) => e.kind === 'config-change');
      expect(change?.detail).toEqual({ changes: [{ key: 'train.learningRate', from: 1e-3, to: 3e-4 }] });
      const comparison = await api<{ differingKeys: string[] }>(runtime, '/api/runs/compare?ids=tiny-1,tiny-2');
      expect(comparison.differingKeys).toEqual(['train.learningRate']);
    } finally {
      await runtime.stop();
    }
  });

  it('starts a fresh run from the source weights: steps from 1, a version never used, old rollouts discarded', async () => {
    const dataDir = tempDir();
    let runtime = await startPeer(dataDir);
    let leftOver: string;
    let lastVersion: number;
    try {
      await trainOneStep(runtime);
      // Ended but not yet trained when the peer stops: sampled under the first run's policy.
      leftOver = await runEpisode(runtime, 'task-c', 1);
      lastVersion = runtime.serving.models.find('tiny')!.policyVersion;
    } finally {
      await runtime.stop();
    }
    runtime = await startPeer(dataDir, { config: TRAINING, run: { fresh: true, name: 'lr-sweep-a' } });
    try {
      const model = runtime.serving.models.find('tiny')!;
      expect(model.policyVersion).toBeGreaterThan(lastVersion);
      expect(getEpisode(runtime.db, leftOver)?.state).toBe('discarded');
      await trainOneStep(runtime);
      const [fresh] = await runs(runtime);
      expect(fresh).toMatchObject({ id: 'tiny-2', name: 'lr-sweep-a', start: { kind: 'source' }, steps: 1, lastStep: 1 });
      const { steps } = await api<{ steps: RunStep[] }>(runtime, '/api/runs/tiny-2/steps');
      expect(steps.map((s) => [s.runStep, s.step])).toEqual([[1, 2]]);
    } finally {
      await runtime.stop();
    }
  });

  it('records a change made while the run trains as an event at its step, and refuses settings fixed for the run', async () => {
    const runtime = await startPeer(tempDir());
    try {
      await trainOneStep(runtime);
      const patch = (overrides: unknown) =>
        fetch(`${runtime.urls.api}/runs/tiny-1/config`, {
          method: 'PATCH',
          headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ overrides }),
        });
      const ok = await patch({ train: { learningRate: 2e-4 } });
      expect(ok.status).toBe(200);
      expect(runtime.training.loop('tiny').state().config.train.learningRate).toBe(2e-4);
      const bad = await patch({ groupSize: 1 });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { name: string; field: string } }).error).toMatchObject({ name: 'TrainingConfigError', field: 'groupSize' });
      const fixed = await patch({ mergeMode: 'naive' });
      expect(fixed.status).toBe(400);
      const detail = await api<RunDetail>(runtime, '/api/runs/tiny-1');
      const changes = detail.events.filter((e) => e.kind === 'config-change');
      expect(changes).toHaveLength(1);
      expect(changes[0]).toMatchObject({ step: 1, detail: { changes: [{ key: 'train.learningRate', from: 1e-3, to: 2e-4 }] } });
      expect(detail.config).toMatchObject({ train: { learningRate: 2e-4 } });
    } finally {
      await runtime.stop();
    }
  });

  it('warns when most groups are discarded as uniform, and says so on the run and the loop', async () => {
    const runtime = await startPeer(tempDir());
    try {
      for (let i = 0; i < 8; i++) {
        await runEpisode(runtime, `same-${i}`, 1);
        await runEpisode(runtime, `same-${i}`, 1);
      }
      const state = runtime.training.loop('tiny').state();
      expect(state.warnings.map((w) => w.code)).toEqual(['mostly_discarded']);
      const [run] = await runs(runtime);
      expect(run.warnings.map((w) => w.code)).toEqual(['mostly_discarded']);
    } finally {
      await runtime.stop();
    }
  });

  it('draws the held-out curve from eval episodes, each at the step whose weights it ran on', async () => {
    const runtime = await startPeer(tempDir(), { config: { ...TRAINING, evalEvery: 1 } });
    try {
      await runEpisode(runtime, 'held-1', 0, { kind: 'eval', success: false });
      await trainOneStep(runtime);
      await runEpisode(runtime, 'held-1', 1, { kind: 'eval', success: true });
      await runEpisode(runtime, 'held-2', 1, { kind: 'eval', success: true });
      const { evals } = await api<{ evals: { step: number; episodes: number; successRate: number | null }[] }>(runtime, '/api/runs/tiny-1/evals');
      expect(evals.map((e) => [e.step, e.episodes, e.successRate])).toEqual([
        [0, 1, 0],
        [1, 2, 1],
      ]);
      const [run] = await runs(runtime);
      expect(run.lastEval).toMatchObject({ step: 1, successRate: 1 });
      // Episode starts tell runners anywhere in the swarm how often to run their held-out tasks.
      const began = (await (await fetch(`${runtime.urls.api.replace('/api', '')}/swarm/v1/episodes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', taskId: 'x' }),
      })).json()) as { step: number; evalEvery: number };
      expect(began).toMatchObject({ step: 1, evalEvery: 1 });
    } finally {
      await runtime.stop();
    }
  });

  it('a finished run stays finished across a restart, and the peer still starts and serves it', async () => {
    const dataDir = tempDir();
    const training = { config: { ...TRAINING, maxSteps: 1 } };
    let runtime = await startPeer(dataDir, training);
    try {
      await trainOneStep(runtime);
      expect(runtime.training.loop('tiny').state().status).toBe('finished');
    } finally {
      await runtime.stop();
    }
    runtime = await startPeer(dataDir, training);
    try {
      expect(runtime.training.loop('tiny').state().status).toBe('finished');
      const [run] = await runs(runtime);
      expect(run).toMatchObject({ id: 'tiny-1', status: 'finished', steps: 1 });
    } finally {
      await runtime.stop();
    }
  });

  it('answers unknown runs with 404 and bad queries with 400, naming the field', async () => {
    const runtime = await startPeer(tempDir());
    try {
      const call = (path: string) => fetch(`${runtime.urls.api}${path}`, { headers: { authorization: `Bearer ${runtime.token}` } });
      expect((await call('/runs/nope-9')).status).toBe(404);
      expect((await call('/runs/bad%20id')).status).toBe(400);
      const limit = await call('/runs?limit=0');
      expect(limit.status).toBe(400);
      expect(((await limit.json()) as { error: { field: string } }).error.field).toBe('limit');
      expect((await call('/runs/compare?ids=tiny-1')).status).toBe(400);
      expect((await call('/runs/compare?ids=tiny-1,nope-2')).status).toBe(404);
      expect((await call('/runs/tiny-1/steps?after=x')).status).toBe(400);
    } finally {
      await runtime.stop();
    }
  });
});
