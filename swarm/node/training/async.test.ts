/**
 * Asynchronous training (`staleness` η ≥ 1) on a real peer: steps run without draining, an episode in flight
 * across a step continues on the new weights (a partial rollout whose calls carry two versions) and is trained
 * with its own logprobs, the admission gate holds a train begin beyond η + 1 batches until a step (or an abort)
 * makes room, and answers 429 only when its hold is spent, and the batcher
 * never hands out an episode more than η versions old, whatever the arrival order.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { seededRandom } from '../../../worker/common/random.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { getCalls, getEpisode } from '../store/episode-reads.ts';
import { Batcher, type BatchEpisode, type EpisodeMark } from './batcher.ts';
import { chat, get, post, runEpisode, startEpisode } from './testing/peer-agent.ts';

const folders: string[] = [];
afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function startPeer(staleness: number, admissionHoldMs?: number): Promise<PeerRuntime> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-async-'));
  folders.push(dataDir);
  return PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 16, admissionHoldMs }],
    training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0, staleness, train: { learningRate: 1e-3, loss: 'decoupled-ppo' } } },
  });
}

describe('asynchronous training on a real peer (staleness 1)', () => {
  it('steps without draining; an episode in flight continues on the new weights and is trained with both versions', async () => {
    const runtime = await startPeer(1);
    try {
      const model = runtime.serving.models.find('tiny')!;
      const loop = runtime.training.loop('tiny');
      const states: string[] = [];
      model.onStateChange((s) => states.push(s));
      // The straggler: one call under version 0, then it waits (its tool is slow) while a step runs.
      const straggler = await startEpisode(runtime, 'task-s');
      const opening = [
        { role: 'system', content: 'You solve tasks.' },
        { role: 'user', content: 'Task task-s: count to three.' },
      ];
      const first = await chat(straggler, opening);
      await runEpisode(runtime, 'task-a', 1);
      await runEpisode(runtime, 'task-a', 0);
      await loop.whenSettled();
      expect(model.policyVersion).toBe(1);
      // No drain and no update state: nothing was refused meanwhile.
      expect(states).not.toContain('draining');
      expect(states).not.toContain('updating');
      // The straggler's next call runs on the new weights.
      await chat(straggler, [...opening, { role: 'assistant', content: first }, { role: 'user', content: 'Output: ok' }]);
      expect(getCalls(runtime.db, straggler.episodeId).map((c) => c.policyVersion)).toEqual([0, 1]);
      await post(runtime, `/swarm/v1/episodes/${straggler.episodeId}/end`, { reward: 1 });
      // Its group fills with a fresh episode; lag 1 ≤ η: trained, both versions' tokens with their own logprobs.
      await runEpisode(runtime, 'task-s', 0);
      await loop.whenSettled();
      expect(model.policyVersion).toBe(2);
      expect(getEpisode(runtime.db, straggler.episodeId)?.state).toBe('trained');
      const steps = (await get(runtime, '/api/models/tiny/steps')).body as unknown as { steps: TrainStepSummary[] };
      expect(steps.steps.at(-1)?.policyLagMax).toBe(1);
    } finally {
      await runtime.stop();
    }
  });

  it('refuses train episodes beyond η + 1 batches with 429 (staleness_bound) once its hold is spent; eval episodes pass', async () => {
    // No hold: the bound's answer comes at once, as after a hold that the gate never ended.
    const runtime = await startPeer(1, 0);
    try {
      // η + 1 = 2 batches of 2 episodes: four train episodes may be in flight or queued.
      for (let i = 0; i < 4; i++) await startEpisode(runtime, `task-${i}`);
      const refused = await post(runtime, '/swarm/v1/episodes', { model: 'tiny', taskId: 'task-9' });
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ name: 'AdmissionThrottledError' });
      expect((await post(runtime, '/swarm/v1/episodes', { model: 'tiny', taskId: 'task-9', kind: 'eval' })).status).toBe(201);
    } finally {
      await runtime.stop();
    }
  });
});

describe('a train begin beyond the staleness bound waits for it (staleness 1)', () => {
  /** The deadline of waiting for a begin to reach the peer (or leave it): generous on a loaded machine. */
  const UNTIL_HELD = { timeout: 10_000, interval: 20 };
  /** Four train episodes: the bound (η + 1 = 2 batches of 2). */
  async function fillToBound(runtime: PeerRuntime) {
    return Promise.all(['task-a', 'task-a', 'task-b', 'task-b'].map((task) => startEpisode(runtime, task)));
  }
  /** A begin, once the bound holds it; `answer` resolves when it is answered. */
  async function heldBegin(runtime: PeerRuntime, taskId: string) {
    const model = runtime.serving.models.find('tiny')!;
    const answer = post(runtime, '/swarm/v1/episodes', { model: 'tiny', taskId });
    await vi.waitFor(() => expect(model.heldAdmissionCount).toBe(1), UNTIL_HELD);
    return { answer };
  }
  async function finish(runtime: PeerRuntime, episode: CreateEpisodeResponse, reward: number) {
    await chat(episode, [{ role: 'user', content: `Task ${episode.episodeId}: count to three.` }]);
    expect((await post(runtime, `/swarm/v1/episodes/${episode.episodeId}/end`, { reward })).status).toBe(200);
  }

  it('is admitted once a step takes the episodes ahead of it, without a refusal', async () => {
    const runtime = await startPeer(1);
    try {
      const [a1, a2] = await fillToBound(runtime);
      const begin = await heldBegin(runtime, 'task-c');
      // task-a's group completes: the step takes it, and the bound has room again.
      await finish(runtime, a1, 1);
      await finish(runtime, a2, 0);
      const admitted = await begin.answer;
      expect(admitted.status, JSON.stringify(admitted.body)).toBe(201);
      await runtime.training.loop('tiny').whenSettled();
      expect(runtime.serving.models.find('tiny')!.step).toBe(1);
    } finally {
      await runtime.stop();
    }
  });

  it('is admitted when an episode in flight is aborted', async () => {
    const runtime = await startPeer(1);
    try {
      const [a1] = await fillToBound(runtime);
      const begin = await heldBegin(runtime, 'task-c');
      expect((await post(runtime, `/swarm/v1/episodes/${a1.episodeId}/abort`, { reason: 'the agent gave up' })).status).toBe(200);
      expect((await begin.answer).status).toBe(201);
    } finally {
      await runtime.stop();
    }
  });

  it('a client that hangs up while held is never admitted: its slot stays free', async () => {
    const runtime = await startPeer(1);
    try {
      const model = runtime.serving.models.find('tiny')!;
      const [a1] = await fillToBound(runtime);
      const hangUp = new AbortController();
      const abandoned = fetch(`http://127.0.0.1:${runtime.port}/swarm/v1/episodes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', taskId: 'task-c' }),
        signal: hangUp.signal,
      }).catch((err: Error) => err);
      await vi.waitFor(() => expect(model.heldAdmissionCount).toBe(1), UNTIL_HELD);
      hangUp.abort();
      expect(await abandoned).toMatchObject({ name: 'AbortError' });
      await vi.waitFor(() => expect(model.heldAdmissionCount).toBe(0), UNTIL_HELD);
      // Room for one: the abandoned begin does not take it.
      await post(runtime, `/swarm/v1/episodes/${a1.episodeId}/abort`, { reason: 'the agent gave up' });
      expect(model.activeTrainEpisodes).toBe(3);
      expect((await post(runtime, '/swarm/v1/episodes', { model: 'tiny', taskId: 'task-d' })).status).toBe(201);
    } finally {
      await runtime.stop();
    }
  });
});

describe('the staleness bound (property over random arrival orders)', () => {
  it('never hands out an episode more than η versions old, and loses none', () => {
    for (let trial = 0; trial < 200; trial++) {
      const rand = seededRandom(trial + 1);
      const eta = 1 + (trial % 3);
      const marks: EpisodeMark[] = [];
      const batcher = new Batcher<BatchEpisode>({ batchTasks: 2, groupSize: 2, excludeUniformGroups: false, maxPolicyLag: 0, staleness: eta }, (m) => marks.push(m));
      let version = 0;
      let trained = 0;
      const added = 60;
      for (let i = 0; i < added; i++) {
        // An episode that began up to 4 versions ago finishes now, in a random task.
        const began = Math.max(0, version - Math.floor(rand() * 5));
        batcher.add({ episodeId: `e${i}`, groupId: `t${Math.floor(rand() * 4)}`, kind: 'train', outcome: 'ended', reward: rand(), policyVersion: began }, version);
        if (batcher.ready && rand() < 0.7) {
          // Null when dropping the stale ones left too few groups.
          const batch = batcher.takeBatch(version) ?? [];
          for (const e of batch.flatMap((g) => g.episodes)) expect(version - e.policyVersion).toBeLessThanOrEqual(eta);
          trained += batch.reduce((a, g) => a + g.episodes.length, 0);
          if (batch.length > 0) version += 1;
        }
      }
      const counts = batcher.counts();
      expect(trained + marks.length + counts.queuedEpisodes + counts.completeGroups * 2).toBe(added);
      expect(marks.every((m) => m.disposition === 'dropped-stale')).toBe(true);
    }
  });
});
