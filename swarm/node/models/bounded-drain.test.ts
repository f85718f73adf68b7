/**
 * One idle episode cannot hold an update (and with it every other agent) for long: on a real peer, a straggler still
 * open when a batch is ready is aborted after the model's drainTimeoutS, the step runs, and the straggler's agent
 * gets 409 on its next call.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PeerRuntime } from '../runtime.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { chat, post, runEpisode, startEpisode } from '../training/testing/peer-agent.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bounded-drain-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

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
      const straggler = await startEpisode(runtime, 'slow-task');
      await chat(straggler, [{ role: 'user', content: 'Count to three.' }]);
      await runEpisode(runtime, 'task-1', 0);
      await runEpisode(runtime, 'task-1', 1);
      const model = runtime.serving.models.find('tiny')!;
      await expect.poll(() => model.step, { timeout: 60_000 }).toBe(1);
      expect(getEpisode(runtime.db, straggler.episodeId)).toMatchObject({ state: 'aborted' });
      expect(getEpisode(runtime.db, straggler.episodeId)?.abortReason).toMatch(/^drain_timeout:/);
      const late = await post(runtime, '/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'still there?' }] }, straggler.apiKey);
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
      const begun = await startEpisode(runtime, 't', { idleTimeoutS: 86_400 });
      await expect.poll(() => getEpisode(runtime.db, begun.episodeId)?.state, { timeout: 30_000 }).toBe('aborted');
      expect(runtime.serving.models.find('tiny')!.pool.active).toBe(0);
    } finally {
      await runtime.stop();
    }
  });
});
