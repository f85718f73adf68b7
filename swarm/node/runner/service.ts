/**
 * Wires the client runner into a peer: episodes through this peer's own swarm protocol over HTTP (the runner
 * never reaches into the model host), each script with a client key of its own name, its control routes, and
 * its events on the control WebSocket.
 */
import { mkdirSync } from 'node:fs';
import { ControlRouter } from '../control/routes.ts';
import { mintClientKey } from '../episodes/keys.ts';
import { clientKeyGeneration } from '../store/client-keys.ts';
import { getCalls } from '../store/episode-reads.ts';
import type { PeerContext, ServiceHandle } from '../services.ts';
import { EpisodeApi } from './episode-api.ts';
import { addClientRoutes } from './routes.ts';
import { ClientRunner } from './runner.ts';

export interface ClientRunnerService extends ServiceHandle {
  runner: ClientRunner;
}

export function startClientRunner(ctx: PeerContext): ClientRunnerService {
  mkdirSync(ctx.paths.scripts, { recursive: true });
  // The swarm protocol sits beside the control API on the same origin; known once the server listens.
  const swarmUrl = () => ctx.urls().api.replace(/\/api$/, '/swarm/v1');
  // Minted per request in the client's current generation: a revocation never locks the peer's own runner out.
  const keyOf = (client: string) => mintClientKey(ctx.identity.secret, client, { generation: clientKeyGeneration(ctx.db, client) });
  const runner = new ClientRunner({
    api: new EpisodeApi(swarmUrl, keyOf),
    dataDir: ctx.paths.dataDir,
    scriptsDir: ctx.paths.scripts,
    db: ctx.db,
    log: ctx.log,
    broadcast: (event) => ctx.publish(event),
    // A dry run's transcript: what the agent sent and what the model answered, as the store recorded it.
    readCalls: (episodeId) => getCalls(ctx.db, episodeId).map((c) => ({ messages: c.messages, assistantMessage: c.assistantMessage, finishReason: c.finishReason })),
  });
  const routes = new ControlRouter(ctx.controlToken);
  addClientRoutes(routes, { runner, mintClientKey: keyOf, swarmUrl });
  return {
    name: 'runner',
    runner,
    routes,
    // Whether agent scripts run in a sandbox (bubblewrap) or only as the peer's user: said in every status.
    status: (status) => {
      status.isolation = runner.isolation();
    },
    close: () => runner.close(),
  };
}
