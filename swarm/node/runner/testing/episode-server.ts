/**
 * The REAL episode routes for the runner's tests: the peer's serving service (startServing: model host, episode
 * service, gateway, swarm router) over a SQLite store in a temp dir, behind the peer's real HTTP server, with
 * builtin:tiny's engine on the test's own thread (it loads in well under a second). The runner talks to it
 * exactly as to a peer; tests read what the server stored through the store's own functions.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { createEngine } from '../../../../worker/node/load-model.ts';
import { createHttpServer, listen } from '../../http/server.ts';
import { createLogger } from '../../log.ts';
import type { HostedModel } from '../../models/model-host.ts';
import { startServing } from '../../models/serving.ts';
import { dataPaths } from '../../paths.ts';
import type { PeerContext } from '../../services.ts';
import { openStore } from '../../store/db.ts';
import type { EpisodeMeta } from '../../../common/timeline/export.ts';
import { EPISODE_PAGE_MAX, listEpisodes } from '../../store/episode-list.ts';
import { getCalls, getEpisode } from '../../store/episode-reads.ts';

export interface EpisodeServerOptions {
  /** Episodes in flight at once before begins get 429 (the model's pool). */
  poolLimit?: number;
  /** Host aliases of the model `tiny`. */
  aliases?: string[];
}

export interface EpisodeServer {
  url: string;
  swarmUrl: string;
  /** The control token: accepted on /swarm/v1 like a client key. */
  token: string;
  db: Database;
  model: HostedModel;
  /** The episode as the server stored it. */
  episode(id: string): EpisodeMeta | undefined;
  /** How many LLM calls the server recorded for it. */
  calls(id: string): number;
  /** Every stored episode of a task id (for clients whose runs the test does not see, like SDK processes). */
  episodesOfTask(taskId: string): EpisodeMeta[];
  close(): Promise<void>;
}

/** Generous for tests that run many scripts at once; a contract test may want it small. */
const DEFAULT_POOL_LIMIT = 64;

export async function startEpisodeServer(options: EpisodeServerOptions = {}): Promise<EpisodeServer> {
  const paths = dataPaths(mkdtempSync(join(tmpdir(), 'agentjet-episode-server-')));
  const db = openStore(paths.store);
  const token = randomBytes(16).toString('hex');
  let url = '';
  // A peer's context with only what serving reads; nothing here publishes or tracks status.
  const ctx: PeerContext = {
    db,
    log: createLogger({ consoleLevel: 'silent' }),
    paths,
    identity: { nodeId: randomBytes(8).toString('hex'), secret: randomBytes(32).toString('hex'), createdAt: new Date().toISOString() },
    roles: ['server'],
    controlToken: token,
    publish: () => undefined,
    statusChanged: () => undefined,
    urls: () => ({ api: `${url}/api`, gateway: `${url}/v1`, ui: url }),
  };
  const serving = await startServing(ctx, {
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: options.aliases ?? ['gpt-4o-mini'], poolLimit: options.poolLimit ?? DEFAULT_POOL_LIMIT }],
    startEngine: (source) => createEngine({ source }),
  });
  const model = serving.models.models[0];
  if (model.error) throw new Error(`builtin:tiny did not load: ${model.error}`);
  const server: Server = createHttpServer({ mounts: () => serving.mounts ?? [], uiRoot: paths.dataDir, log: ctx.log });
  url = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`;

  let closing: Promise<void> | undefined;
  return {
    url,
    swarmUrl: `${url}/swarm/v1`,
    token,
    db,
    model,
    episode: (id) => getEpisode(db, id),
    calls: (id) => getCalls(db, id).length,
    episodesOfTask: (taskId) => listEpisodes(db, { taskId, limit: EPISODE_PAGE_MAX }).episodes,
    close: () =>
      (closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await serving.close();
        db.close();
        rmSync(paths.dataDir, { recursive: true, force: true });
      })()),
  };
}
