import { protocolId } from '../shared/constants.ts';

export const WEIGHTS_PROTOCOL_NAME = 'weights';
export const WEIGHTS_PROTOCOL_VERSION = 1;
export const WEIGHTS_PROTOCOL = protocolId(WEIGHTS_PROTOCOL_NAME, WEIGHTS_PROTOCOL_VERSION);

/** Manifest announcements of a swarm: `/agentjet/<swarm>/weights/1`. */
export function weightsTopic(swarmName: string): string {
  return `/agentjet/${swarmName}/weights/1`;
}

export const MANIFEST_VERSION = 1;
/** Prefix of the signed bytes, so that a manifest signature can never be replayed as another kind of message. */
export const MANIFEST_SIGNING_DOMAIN = 'agentjet-weights-manifest-v1\n';

/** Default chunk: big enough that per-chunk overhead vanishes, small enough that a bad chunk costs little. */
export const DEFAULT_CHUNK_BYTES = 1024 * 1024;
/** Largest chunk a peer accepts; it bounds every binary frame read. */
export const MAX_CHUNK_BYTES = 16 * 1024 * 1024;
/** Chunks per manifest: keeps the signed manifest (≈110 bytes per chunk) well under a gossip message. */
export const MAX_CHUNKS = 4096;
/** A signed manifest of MAX_CHUNKS entries fits in this. */
export const MAX_SIGNED_MANIFEST_BYTES = 1024 * 1024;
/**
 * Chunks asked for in one request (fewer when that leaves a provider idle). Each request sets up a direct
 * session anew and drains the pipeline: 64 rather than 16 measured ~10% faster on loopback.
 */
export const CHUNKS_PER_REQUEST = 64;
/** Providers fetched from at once during one fetch (one stream each). */
export const FETCH_CONCURRENCY = 2;
/**
 * A fetch starts an fdatasync in the background each time this much more has been written: the disk works while the
 * network delivers, and the sync before the hand-over (about 0.4 ms per MB here) is mostly done when the last chunk lands.
 */
export const SYNC_EVERY_BYTES = 16 * 1024 * 1024;
/** Tries per chunk before the fetch fails: a corrupted chunk is retried, preferably from another provider. */
export const MAX_CHUNK_ATTEMPTS = 4;
/** Failed streams before a provider is dropped from this fetch. */
export const MAX_PROVIDER_FAILURES = 3;
/** A provider silent this long (per frame) is considered gone. */
export const WEIGHTS_READ_TIMEOUT_MS = 30_000;
/** The request is small JSON (ids and up to CHUNKS_PER_REQUEST… indices). */
export const MAX_WEIGHTS_REQUEST_BYTES = 64 * 1024;
export const MAX_WEIGHTS_INBOUND_STREAMS = 64;
/** A direct-channel offer waits this long for its fetcher; a fetcher waits this long to connect before falling back. */
export const DIRECT_CONNECT_TIMEOUT_MS = 5_000;
/** Direct-channel offers open at once on a provider; beyond it fetchers are sent to the libp2p stream. */
export const MAX_DIRECT_OFFERS = 32;
