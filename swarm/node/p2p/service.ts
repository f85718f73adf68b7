/**
 * The p2p service of a peer runtime: starts the libp2p node of the configured swarm (settings.ts), announces what
 * this peer offers, serves the swarm protocols for its hosted models (server-side.ts), relays episodes and
 * inference for models hosted elsewhere (remote-episodes.ts, relay-routes.ts), syncs weights (weights-sync.ts),
 * and adds its control routes:
 *   GET /api/peers                          the live swarm: this peer and every peer heard from
 *   GET /api/peers/:peerId/episodes/:id     one finished episode's merge-view export, fetched from that peer
 *   GET /api/p2p/weights                    weights published here and fetched (verified) from peers, each fetched
 *                                           one `loaded` or `refused: { code, reason }` (weights-blob.ts)
 */
import { createSwarmNode, type PresenceContent, type SwarmNode } from '../../../p2p/index.ts';
import type { PeersResponse, SwarmPeer } from '../../common/api.ts';
import { ControlRouter } from '../control/routes.ts';
import { notFound } from '../http/errors.ts';
import { sendJson } from '../http/respond.ts';
import type { Serving } from '../models/serving.ts';
import type { PeerContext, ServiceHandle } from '../services.ts';
import { clientKeyGeneration } from '../store/client-keys.ts';
import { relayMounts } from './relay-routes.ts';
import { RemoteEpisodes } from './remote-episodes.ts';
import { serveSwarmProtocols } from './server-side.ts';
import type { ResolvedP2p } from './settings.ts';
import { WeightsSync } from './weights-sync.ts';

/** What the p2p service uses of the peer's other services. */
export interface P2pDeps {
  serving: Serving;
  /** Names of the attached client scripts (announced in presence). */
  clientScripts(): string[];
  /** Whether this peer trains the model itself (a mirror then never loads fetched weights over its own). */
  trainsLocally(model: string): boolean;
  /** Whether the model trains asynchronously (staleness ≥ 1): a serving replica then swaps weights without draining. */
  asynchronous?(model: string): boolean;
}

export interface P2pService extends ServiceHandle {
  node: SwarmNode;
  remote: RemoteEpisodes;
  weights: WeightsSync;
  peers(): SwarmPeer[];
}

/** Addresses whose key mismatch was already said: a peer with the wrong key redials for as long as it runs. */
const REPORTED_MISMATCHES = 256;

export async function startP2pService(ctx: PeerContext, deps: P2pDeps, settings: ResolvedP2p): Promise<P2pService> {
  const mismatchLog = ctx.log.child({ service: 'p2p' });
  const reported = new Set<string>();
  const node = await createSwarmNode({
    onKeyMismatch: ({ direction, remoteAddress }) => {
      const key = `${direction} ${remoteAddress.replace(/\/tcp\/\d+.*$/, '')}`;
      if (reported.has(key) || reported.size >= REPORTED_MISMATCHES) return;
      reported.add(key);
      mismatchLog.warn(
        direction === 'inbound'
          ? 'a peer tried to join with another swarm key; it stays out (give it this swarm\'s token)'
          : 'a swarm peer holds another swarm key; this peer cannot join it (check the swarm token)',
        { remoteAddress },
      );
    },
    dataDir: ctx.paths.p2p,
    swarm: { name: settings.swarm.name, key: settings.swarm.key },
    bootstrap: settings.bootstrap,
    listen: settings.listen,
    mdns: settings.mdns,
    presence: settings.presenceIntervalMs ? { intervalMs: settings.presenceIntervalMs } : undefined,
  });
  try {
    return await serveOnNode(ctx, deps, settings, node);
  } catch (err) {
    // A node that started and then failed to be wired must not keep listening (or keep the process alive).
    await node.stop().catch(() => undefined);
    throw err;
  }
}

async function serveOnNode(ctx: PeerContext, deps: P2pDeps, settings: ResolvedP2p, node: SwarmNode): Promise<P2pService> {
  const log = ctx.log.child({ service: 'p2p' });
  const gatewayUrl = () => ctx.urls().gateway;
  const { serving } = deps;
  serveSwarmProtocols({ node, serving, db: ctx.db, gatewayUrl, log });
  const remote = new RemoteEpisodes(node, log, { graceMs: settings.peerGraceMs });
  const mounts = relayMounts({
    node,
    remote,
    serving,
    controlToken: ctx.controlToken,
    secret: ctx.identity.secret,
    nodeId: ctx.identity.nodeId,
    generationOf: (client) => clientKeyGeneration(ctx.db, client),
    gatewayUrl,
    log,
  });
  const weights = new WeightsSync({
    node,
    models: serving.models,
    dir: ctx.paths.p2p,
    mirror: settings.mirror,
    trainsLocally: (model) => deps.trainsLocally(model),
    asynchronous: (model) => deps.asynchronous?.(model) ?? false,
    log,
  });

  const content = (): PresenceContent => presenceContent(ctx, deps);
  await node.presence.setContent(content);
  // Announce at once when a model's state or policy changes, so clients pick peers on fresh load figures.
  const offStateChanges = serving.models.models.map((model) => model.onStateChange(() => void node.presence.announceNow()));

  const peers = (): SwarmPeer[] => {
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

  const routes = new ControlRouter(ctx.controlToken);
  routes.get('/api/peers', (_req, res) => {
    const body: PeersResponse = { swarm: node.swarmName, peerId: node.peerId, addresses: node.multiaddrs(), peers: peers() };
    sendJson(res, 200, body);
  });
  routes.get('/api/peers/:peerId/episodes/:id', async (_req, res, { params }) => {
    for await (const record of node.trajectories.fetch(params.peerId, [params.id], {
      signal: AbortSignal.timeout(30_000),
    })) {
      sendJson(res, 200, record.export);
      return;
    }
    throw notFound(`peer ${params.peerId} has no finished episode ${params.id}`, 'episode_not_found');
  });
  routes.get('/api/p2p/weights', (_req, res) => sendJson(res, 200, { published: weights.published, fetched: weights.fetched }));

  let stopping: Promise<void> | undefined;
  const close = () =>
    (stopping ??= (async () => {
      for (const off of offStateChanges) off();
      weights.close();
      remote.close();
      await node.stop();
    })());
  log.info('p2p started', { peerId: node.peerId, swarm: node.swarmName, addresses: node.multiaddrs() });
  return {
    name: 'p2p',
    node,
    remote,
    weights,
    peers,
    routes,
    mounts,
    status: (status) => {
      status.p2p = { enabled: true, peerId: node.peerId, peers: node.presence.list().length, swarm: node.swarmName };
    },
    close,
  };
}

/** What this peer offers: roles, hosted models (with policy version, state and pool), attached scripts. */
function presenceContent(ctx: PeerContext, deps: P2pDeps): PresenceContent {
  const models = deps.serving.models.models.filter((m) => m.state !== 'failed');
  return {
    roles: [...ctx.roles],
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
    clientScripts: deps.clientScripts(),
    gateway: { available: models.length > 0 },
  };
}
