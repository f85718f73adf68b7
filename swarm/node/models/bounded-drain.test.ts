/**
 * One idle episode cannot hold an update (and with it every other agent) for long: on a real peer, a straggler still
 * open when a batch is ready is aborted after the model's drainTimeoutS, the step runs, and the straggler's agent
 * gets 409 on its next call.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { getEpisode } from '../store/episodes.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bounded-drain-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function post<T>(url: string, token: string, body: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as T };
}

describe('a drain with an idle episode in flight', () => {
  it('aborts the straggler after drainTimeoutS and trains', async () => {
    const runtime = await PeerRuntime.start({
      dataDir,
      port: 0,
      consoleLogLevel: 'silent',
      models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8, drainTimeoutS: 0.3 }],
      training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0 } },
    });
    try {
      const swarm = `http://127.0.0.1:${runtime.port}/swarm/v1`;
      const begin = async (taskId: string) => {
        const begun = await post<CreateEpisodeResponse>(`${swarm}/episodes`, runtime.token, { model: 'tiny', taskId });
        expect(begun.status).toBe(201);
        return begun.body;
      };
      const chat = (episode: CreateEpisodeResponse) =>
        post<{ error?: { code: string } }>(`${episode.baseUrl}/chat/completions`, episode.apiKey, {
          model: 'tiny',
          messages: [{ role: 'user', content: 'Count to three.' }],
          max_tokens: 4,
        });
      const straggler = await begin('slow-task');
      expect((await chat(straggler)).status).toBe(200);
      for (const reward of [0, 1]) {
        const episode = await begin('task-1');
        expect((await chat(episode)).status).toBe(200);
        expect((await post(`${swarm}/episodes/${episode.episodeId}/end`, runtime.token, { reward })).status).toBe(200);
      }
      const model = runtime.serving.models.find('tiny')!;
      await expect.poll(() => model.step, { timeout: 60_000 }).toBe(1);
      expect(getEpisode(runtime.db, straggler.episodeId)).toMatchObject({ state: 'aborted' });
      expect(getEpisode(runtime.db, straggler.episodeId)?.abortReason).toMatch(/^drain_timeout:/);
      const late = await chat(straggler);
      expect(late.status).toBe(409);
    } finally {
      await runtime.stop();
    }
  });

  it("caps an episode's idle timeout at the model's maxIdleTimeoutS", async () => {
    const runtime = await PeerRuntime.start({
      dataDir: join(dataDir, 'idle-cap'),
      port: 0,
      consoleLogLevel: 'silent',
      models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8, maxIdleTimeoutS: 0.3 }],
      training: { autoStart: false },
    });
    try {
      const begun = await post<CreateEpisodeResponse>(`http://127.0.0.1:${runtime.port}/swarm/v1/episodes`, runtime.token, {
        model: 'tiny',
        taskId: 't',
        idleTimeoutS: 86_400,
      });
      expect(begun.status).toBe(201);
      await expect.poll(() => getEpisode(runtime.db, begun.body.episodeId)?.state, { timeout: 30_000 }).toBe('aborted');
      expect(runtime.serving.models.find('tiny')!.pool.active).toBe(0);
    } finally {
      await runtime.stop();
    }
  });
});
