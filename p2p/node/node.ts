/**
 * createSwarmNode: the libp2p node of a peer, started, with the agentjet services attached.
 * Identity from the data dir; TCP + WebSockets; pnet (when a swarm key is given), noise, yamux; identify, ping,
 * gossipsub; mDNS and bootstrap discovery; known peers redialled with backoff when they drop.
 */
import './websocket-global.ts';
import './xsalsa20-fix.ts';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { bootstrap } from '@libp2p/bootstrap';
import { gossipsub } from '@libp2p/gossipsub';
import type { GossipSub } from '@libp2p/gossipsub';
import { identify } from '@libp2p/identify';
import type { Identify } from '@libp2p/identify';
import { KEEP_ALIVE } from '@libp2p/interface';
import type { ConnectionGater, Libp2p, PeerId, PrivateKey } from '@libp2p/interface';
import { mdns } from '@libp2p/mdns';
import { peerIdFromString } from '@libp2p/peer-id';
import { ping } from '@libp2p/ping';
import type { Ping } from '@libp2p/ping';
import { preSharedKey } from '@libp2p/pnet';
import { tcp } from '@libp2p/tcp';
import { webSockets } from '@libp2p/websockets';
import { multiaddr } from '@multiformats/multiaddr';
import { createLibp2p } from 'libp2p';
import type { Libp2pOptions } from 'libp2p';
import { PresenceService } from '../presence/presence.ts';
import type { PresenceInit } from '../presence/presence.ts';
import { EpisodeProtocol } from '../protocols/episode/episode.ts';
import { InferProtocol } from '../protocols/infer/infer.ts';
import { ViolationTracker } from '../protocols/shared/violations.ts';
import { TrajectoriesProtocol } from '../protocols/trajectories/trajectories.ts';
import { WeightsProtocol } from '../protocols/weights/weights.ts';
import type { WeightsInit } from '../protocols/weights/weights.ts';
import { SwarmName, swarmKeyToPsk } from '../swarm-token/token.ts';
import type { SwarmSecret } from '../swarm-token/token.ts';
import {
  DEFAULT_LISTEN,
  OPEN_SWARM_NAME,
  MAX_STREAM_WINDOW_BYTES,
  PNET_HANDSHAKE_TIMEOUT_MS,
  STREAM_WINDOW_BYTES,
  RECONNECT_BACKOFF_FACTOR,
  RECONNECT_INTERVAL_MS,
  RECONNECT_RETRIES,
  mdnsServiceTag,
} from './constants.ts';
import { InvalidNodeOptionsError } from './errors.ts';
import { loadOrCreatePrivateKey } from './identity.ts';
import { withSwarmKeyCheck, type SwarmKeyMismatch } from './swarm-key-check.ts';

export interface SwarmNodeOptions {
  /** Folder for the node's identity (and nothing else from p2p). */
  dataDir: string;
  /** Multiaddrs to listen on; default TCP and WebSockets on every interface, free ports. */
  listen?: string[];
  /** The private swarm (name + 64-hex pre-shared key, e.g. from parseSwarmToken); none = open swarm. */
  swarm?: SwarmSecret;
  /** Multiaddrs (with /p2p/<id>) dialled at start and kept connected. */
  bootstrap?: string[];
  /** LAN discovery; default true. */
  mdns?: boolean;
  /** When set, only these peer ids may connect (in either direction). */
  allowList?: string[];
  presence?: PresenceInit;
  weights?: WeightsInit;
  /** Protocol violations tolerated per peer before hanging up. */
  maxViolations?: number;
  /** In a private swarm: a peer holds another swarm key (swarm-key-check.ts); the connection is refused either way. */
  onKeyMismatch?: (mismatch: SwarmKeyMismatch) => void;
}

export type SwarmLibp2p = Libp2p<{ identify: Identify; ping: Ping; pubsub: GossipSub }>;

export interface SwarmNode {
  readonly peerId: string;
  readonly swarmName: string;
  /** The underlying node, for what the wrappers do not cover (events, peerStore). */
  readonly libp2p: SwarmLibp2p;
  readonly presence: PresenceService;
  readonly infer: InferProtocol;
  readonly episode: EpisodeProtocol;
  readonly weights: WeightsProtocol;
  readonly trajectories: TrajectoriesProtocol;
  readonly violations: ViolationTracker;
  /** Addresses others can dial, each ending in /p2p/<peerId>. */
  multiaddrs(): string[];
  /** Connect to a peer by multiaddr; returns its peer id. */
  dial(address: string, options?: { signal?: AbortSignal }): Promise<string>;
  connectedPeers(): string[];
  /** Stop everything, saying goodbye in presence first (bounded wait); safe to call twice. */
  stop(): Promise<void>;
}

export async function createSwarmNode(options: SwarmNodeOptions): Promise<SwarmNode> {
  const swarmName = options.swarm ? SwarmName.parse(options.swarm.name) : OPEN_SWARM_NAME;
  const privateKey = await loadOrCreatePrivateKey(options.dataDir);
  const libp2p = await createLibp2p(libp2pOptions(options, swarmName, privateKey));

  const violations = new ViolationTracker({
    maxViolations: options.maxViolations,
    disconnect: async (peer) => {
      // Drop the keep-alive tag first, or the reconnect queue would dial the offender straight back.
      await libp2p.peerStore.merge(peer, { tags: { [KEEP_ALIVE]: undefined } }).catch(() => undefined);
      await libp2p.hangUp(peer);
    },
  });
  const components = { libp2p, violations };
  const presence = new PresenceService(
    { peerId: libp2p.peerId, pubsub: libp2p.services.pubsub, violations, swarmName },
    options.presence,
  );
  const infer = new InferProtocol(components);
  const episode = new EpisodeProtocol(components);
  const trajectories = new TrajectoriesProtocol(components);
  const weights = new WeightsProtocol(
    { ...components, privateKey, peerId: libp2p.peerId, pubsub: libp2p.services.pubsub, swarmName },
    options.weights,
  );

  keepKnownPeersConnected(libp2p);
  if (options.mdns ?? true) dialDiscoveredPeers(libp2p);

  await Promise.all([infer.start(), episode.start(), trajectories.start(), weights.start()]);
  presence.start();

  let stopping: Promise<void> | undefined;
  return {
    peerId: libp2p.peerId.toString(),
    swarmName,
    libp2p,
    presence,
    infer,
    episode,
    weights,
    trajectories,
    violations,
    multiaddrs: () => libp2p.getMultiaddrs().map((address) => address.toString()),
    dial: async (address, dialOptions = {}) => {
      const connection = await libp2p.dial(multiaddr(address), { signal: dialOptions.signal });
      return connection.remotePeer.toString();
    },
    connectedPeers: () => [...new Set(libp2p.getConnections().map((c) => c.remotePeer.toString()))],
    stop: () => {
      stopping ??= (async () => {
        await presence.leave();
        presence.stop();
        await Promise.allSettled([infer.stop(), episode.stop(), trajectories.stop(), weights.stop()]);
        await libp2p.stop();
      })();
      return stopping;
    },
  };
}

function libp2pOptions(options: SwarmNodeOptions, swarmName: string, privateKey: PrivateKey): Libp2pOptions<{ identify: Identify; ping: Ping; pubsub: GossipSub }> {
  const listen = options.listen ?? DEFAULT_LISTEN;
  for (const address of [...listen, ...(options.bootstrap ?? [])]) {
    try {
      multiaddr(address);
    } catch {
      throw new InvalidNodeOptionsError(`not a multiaddr: ${address}`);
    }
  }
  const peerDiscovery: NonNullable<Libp2pOptions['peerDiscovery']> = [];
  if (options.bootstrap?.length) peerDiscovery.push(bootstrap({ list: options.bootstrap }));
  if (options.mdns ?? true) peerDiscovery.push(mdns({ serviceTag: mdnsServiceTag(swarmName, options.swarm?.key) }));
  return {
    privateKey,
    addresses: { listen },
    transports: [tcp(), webSockets()],
    connectionEncrypters: [noise()],
    // Weight transfers are window-bound on a busy machine (throughput ≈ window / RTT): start streams with a
    // larger receive window than yamux's 256 KiB.
    streamMuxers: [yamux({ streamOptions: { initialStreamWindowSize: STREAM_WINDOW_BYTES, maxStreamWindowSize: MAX_STREAM_WINDOW_BYTES } })],
    ...(options.swarm
      ? {
          connectionProtector: withSwarmKeyCheck(
            preSharedKey({ psk: swarmKeyToPsk(options.swarm.key), timeout: PNET_HANDSHAKE_TIMEOUT_MS }),
            options.onKeyMismatch ?? (() => {}),
          ),
        }
      : {}),
    ...(options.allowList ? { connectionGater: allowListGater(options.allowList) } : {}),
    connectionManager: {
      reconnectRetries: RECONNECT_RETRIES,
      reconnectRetryInterval: RECONNECT_INTERVAL_MS,
      reconnectBackoffFactor: RECONNECT_BACKOFF_FACTOR,
    },
    peerDiscovery,
    services: {
      identify: identify(),
      ping: ping(),
      pubsub: gossipsub({
        // A lab swarm has a handful of peers: publish even before the mesh forms, to every topic peer,
        // and keep mesh degrees small so that 2-3 peers already form a full mesh.
        allowPublishToZeroTopicPeers: true,
        floodPublish: true,
        D: 4,
        Dlo: 1,
        Dhi: 8,
        Dout: 1,
        heartbeatInterval: 500,
        emitSelf: false,
      }),
    },
  };
}

/** Only peers on the list get past the encryption handshake, in either direction. */
function allowListGater(allowList: string[]): ConnectionGater {
  const allowed = new Set<string>();
  for (const id of allowList) {
    try {
      allowed.add(peerIdFromString(id).toString());
    } catch {
      throw new InvalidNodeOptionsError(`not a peer id: ${id}`);
    }
  }
  const deny = (peer: PeerId) => !allowed.has(peer.toString());
  return {
    denyDialPeer: deny,
    denyInboundEncryptedConnection: deny,
    denyOutboundEncryptedConnection: deny,
  };
}

/** Tag every peer we connect to as keep-alive: libp2p's reconnect queue then redials it with backoff when it drops. */
function keepKnownPeersConnected(libp2p: SwarmLibp2p): void {
  libp2p.addEventListener('peer:connect', (event) => {
    libp2p.peerStore.merge(event.detail, { tags: { [KEEP_ALIVE]: { value: 1 } } }).catch(() => {});
  });
}

/** mDNS only reports peers; dial each one not yet connected (pnet keeps strangers out). */
function dialDiscoveredPeers(libp2p: SwarmLibp2p): void {
  libp2p.addEventListener('peer:discovery', (event) => {
    const peer = event.detail.id;
    if (peer.equals(libp2p.peerId) || libp2p.getConnections(peer).length > 0) return;
    libp2p.dial(peer).catch(() => {});
  });
}
