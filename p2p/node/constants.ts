import { createHash } from 'node:crypto';

/** Listen on every interface, on a free port, over TCP and WebSockets. */
export const DEFAULT_LISTEN = ['/ip4/0.0.0.0/tcp/0', '/ip4/0.0.0.0/tcp/0/ws'];

/** Swarm name used when the node runs without a private swarm (an open, keyless swarm). */
export const OPEN_SWARM_NAME = 'open';

/** Redial a known peer that dropped: 1 s, 2 s, 4 s, … (libp2p's reconnect queue does the waiting). */
export const RECONNECT_RETRIES = 6;
export const RECONNECT_INTERVAL_MS = 1_000;
export const RECONNECT_BACKOFF_FACTOR = 2;

/** The pnet nonce exchange must finish within this; a peer without the key never completes it. */
export const PNET_HANDSHAKE_TIMEOUT_MS = 2_000;

/**
 * mDNS service tag: one per swarm, so that machines of other swarms on the LAN are not even dialled. Derived from the
 * swarm key where there is one (a hash: the tag is public), since every swarm made with the default name shares it.
 */
export function mdnsServiceTag(swarmName: string, swarmKey?: string): string {
  if (!swarmKey) return `_agentjet-${swarmName}._udp.local`;
  const digest = createHash('sha256').update(`agentjet mdns tag\0${swarmKey}`).digest('hex').slice(0, 16);
  return `_agentjet-${digest}._udp.local`;
}

/** Initial yamux receive window per stream: a few weight chunks in flight before the first window update. */
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;
/** yamux may grow a busy stream's window up to this. */
export const MAX_STREAM_WINDOW_BYTES = 16 * 1024 * 1024;
