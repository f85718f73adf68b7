/**
 * Wires the client runner into a peer: episodes through this peer's own swarm protocol over HTTP (the runner
 * never reaches into the model host), each script with a client key of its own name, its control routes, and
 * its events on the control WebSocket.
 */
import { mkdirSync } from 'node:fs';
import type { ServerEvent } from '../../common/api.ts';
import type { Router } from '../http/router.ts';
import type { Logger } from '../log.ts';
import type { Database } from 'better-sqlite3';
import { mintClientKey } from '../episodes/keys.ts';
import { EpisodeApi } from './episode-api.ts';
import { addClientRoutes } from './routes.ts';
import { ClientRunner } from './runner.ts';

export interface RunnerHost {
  db: Database;
  log: Logger;
  identity: { secret: string };
  paths: { dataDir: string; scripts: string };
  control: Router;
  events: { broadcast(event: ServerEvent): void };
  urls: { api: string };
  onStop(closer: () => Promise<void> | void): void;
}

export function startClientRunner(host: RunnerHost): ClientRunner {
  mkdirSync(host.paths.scripts, { recursive: true });
  // The swarm protocol sits beside the control API on the same origin; known once the server listens.
  const swarmUrl = () => host.urls.api.replace(/\/api$/, '/swarm/v1');
  const runner = new ClientRunner({
    api: new EpisodeApi(swarmUrl, (client) => mintClientKey(host.identity.secret, client)),
    dataDir: host.paths.dataDir,
    scriptsDir: host.paths.scripts,
    db: host.db,
    log: host.log,
    broadcast: (event) => host.events.broadcast(event),
  });
  addClientRoutes(host.control, { runner, mintClientKey: (name) => mintClientKey(host.identity.secret, name), swarmUrl });
  host.onStop(() => runner.close());
  return runner;
}
