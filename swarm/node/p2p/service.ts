/**
 * The p2p service of a peer runtime: starts the libp2p node of the configured swarm (settings.ts), announces what
 * this peer offers, serves the swarm protocols for its hosted models (server-side.ts), relays episodes and
 * inference for models hosted elsewhere (remote-episodes.ts, relay-routes.ts), syncs weights (weights-sync.ts),
 * and adds its control routes:
 *   GET /api/peers                          the live swarm: this peer and every peer heard from
 *   GET /api/peers/:peerId/episodes/:id     one finished episode's merge-view export, fetched from that peer
 *   GET /api/p2p/weights                    weights published here and fetched (verified) from peers
 */
import { createSwarmNode, type PresenceContent, type SwarmNode } from '../../../p2p/index.ts';
import type { PeersResponse, StatusPayload, SwarmPeer } from '../../common/api.ts';
import type { ControlRouter } from '../control/routes.ts';
import { notFound } from '../http/errors.ts';
import { sendJson } from '../http/respond.ts';
import type { Mount } from '../http/server.ts';
import type { Logger } from '../log.ts';
import type { Serving } from '../models/serving.ts';
import type { ClientRunner } from '../runner/runner.ts';
import type { TrainingService } from '../training/service.ts';
import type { Database } from 'better-sqlite3';
import { mountRelayRoutes } from './relay-routes.ts';
import { RemoteEpisodes } from './remote-episodes.ts';
import { serveSwarmProtocols } from './server-side.ts';
import type { ResolvedP2p } from './settings.ts';
import { WeightsSync } from './weights-sync.ts';

/** What the service needs from the runtime (PeerRuntime satisfies it). */
export interface P2pHost {
  serving: Serving;
  runner: ClientRunner;
  training: Pick<TrainingService, 'loops'>;
  db: Database;
  control: ControlRouter;
  mounts: Mount[];
  token: string;
  identity: { secret: string; nodeId: string };
  paths: { p2p: string };
  options: { roles: readonly string[] };
  urls: { gateway: string };
  log: Logger;
  addStatusPart(part: (status: StatusPayload) => void): void;
  onStop(closer: () => Promise<void> | void): void;
}

export interface P2pService {
  node: SwarmNode;
  remote: RemoteEpisodes;
  weights: WeightsSync;
  peers(): PeerView[];
  stop(): Promise<void>;
}

export type PeerView = SwarmPeer;

export async function startP2pService(host: P2pHost, settings: ResolvedP2p): Promise<P2pService> {
  const log = host.log.child({ service: 'p2p' });
  const node = await createSwarmNode({
    dataDir: host.paths.p2p,
    swarm: { name: settings.swarm.name, key: settings.swarm.key },
    bootstrap: settings.bootstrap,
    listen: settings.listen,
    mdns: settings.mdns,
    presence: settings.presenceIntervalMs ? { intervalMs: settings.presenceIntervalMs } : undefined,
  });
  const gatewayUrl = () => host.urls.gateway;
  serveSwarmProtocols({ node, serving: host.serving, db: host.db, gatewayUrl, log });
  const remote = new RemoteEpisodes(node, log, { graceMs: settings.peerGraceMs });
  mountRelayRoutes({
    node,
    remote,
    serving: host.serving,
    mounts: host.mounts,
    controlToken: host.token,
    secret: host.identity.secret,
    nodeId: host.identity.nodeId,
    gatewayUrl,
    log,
  });
  const weights = new WeightsSync({
    node,
    models: host.serving.models,
    dir: host.paths.p2p,
    mirror: settings.mirror,
    trainsLocally: (model) => host.training.loops.get(model)?.state().status === 'running',
    log,
  });

  const content = (): PresenceContent => presenceContent(host);
  await node.presence.setContent(content);
  // Announce at once when a model's state or policy changes, so clients pick peers on fresh load figures.
  const offStateChanges = host.serving.models.models.map((model) =>
    model.onStateChange(() => void node.presence.announceNow()),
  );

  const peers = (): PeerView[] => {
    const connected = new Set(node.connectedPeers());
    const self = content();
    return [
      { peerId: node.peerId, self: true, connected: true, lastSeen: null, ...self },
      ...node.presence.list().map((entry) => ({
        peerId: entry.peerId,
        self: false,
        connected: connected.has(entry.peerId),
        lastSeen: new Date(entry.lastSeen).toISOString(),
        roles: entry.announcement.roles,
        models: entry.announcement.models,
        pool: entry.announcement.pool,
        clientScripts: entry.announcement.clientScripts,
      })),
    ];
  };

  host.control.get('/api/peers', (_req, res) => {
    const body: PeersResponse = { swarm: node.swarmName, peerId: node.peerId, addresses: node.multiaddrs(), peers: peers() };
    sendJson(res, 200, body);
  });
  host.control.get('/api/peers/:peerId/episodes/:id', async (_req, res, { params }) => {
    for await (const record of node.trajectories.fetch(params.peerId, [params.id], {
      signal: AbortSignal.timeout(30_000),
    })) {
      sendJson(res, 200, record.export);
      return;
    }
    throw notFound(`peer ${params.peerId} has no finished episode ${params.id}`, 'episode_not_found');
  });
  host.control.get('/api/p2p/weights', (_req, res) =>
    sendJson(res, 200, { published: weights.published, fetched: weights.fetched }),
  );
  host.addStatusPart((status) => {
    status.p2p = {
      enabled: true,
      peerId: node.peerId,
      peers: node.presence.list().length,
      swarm: node.swarmName,
    };
  });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const off of offStateChanges) off();
      weights.close();
      remote.close();
      await node.stop();
    })());
  host.onStop(stop);
  log.info('p2p started', { peerId: node.peerId, swarm: node.swarmName, addresses: node.multiaddrs() });
  return { node, remote, weights, peers, stop };
}

/** What this peer offers: roles, hosted models (with policy version, state and pool), attached scripts. */
function presenceContent(host: P2pHost): PresenceContent {
  const models = host.serving.models.models.filter((m) => m.state !== 'failed');
  return {
    roles: [...host.options.roles],
    models: models.map((m) => ({
      name: m.name,
      policyVersion: m.policyVersion,
      step: m.step,
      aliases: [...m.aliases],
      state: m.state,
      pool: { ...m.pool },
    })),
    pool: {
      load: models.reduce((n, m) => n + m.pool.active, 0),
      capacity: models.reduce((n, m) => n + m.pool.limit, 0),
    },
    clientScripts: host.runner.list().map((client) => client.name),
    gateway: { available: models.length > 0 },
  };
}
