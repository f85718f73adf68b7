/**
 * Test helpers: a real peer (PeerRuntime, SQLite store, a model in a worker thread) on 127.0.0.1, episodes started
 * over its swarm API, exactly as the gateway's clients meet it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CreateEpisodeResponse } from '../../../common/swarm-api.ts';
import { PeerRuntime, type PeerOptions } from '../../runtime.ts';

export interface TestPeer {
  runtime: PeerRuntime;
  /** The peer's origin (what Anthropic's clients take as their base URL). */
  origin: string;
  swarmPost(path: string, body: unknown): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }>;
  startEpisode(extra?: Record<string, unknown>): Promise<CreateEpisodeResponse>;
  stop(): Promise<void>;
}

export async function startTestPeer(options: Partial<PeerOptions> = {}): Promise<TestPeer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-gateway-apis-'));
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['gpt-4o-mini', 'claude-sonnet-4-5'], poolLimit: 64 }],
    ...options,
  });
  const origin = `http://127.0.0.1:${runtime.port}`;
  const swarmPost = async (path: string, body: unknown) => {
    const res = await fetch(`${origin}/swarm/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  return {
    runtime,
    origin,
    swarmPost,
    async startEpisode(extra = {}) {
      const res = await swarmPost('/episodes', { model: runtime.serving.models.models[0].name, taskId: 'task-1', ...extra });
      if (res.status !== 201) throw new Error(`episode not started: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as unknown as CreateEpisodeResponse;
    },
    async stop() {
      await runtime.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
