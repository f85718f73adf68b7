/**
 * Episode keys and client keys, signed with HMAC-SHA256 under the node secret (base64url):
 *   episode key  `aj-ep-<episodeId>.<sig>`                         dies with its episode (the service refuses it after)
 *   client key   `aj-ck-<expires>.<generation>.<client>.<sig>`     expires (unix seconds, base 36); revoked by raising
 *                                                                  the client's generation in the store (client-keys.ts)
 * Only this node can mint them (the secret never leaves it), so a key cannot be forged, moved to another episode or
 * client, or extended. Verification is constant-time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const EPISODE_PREFIX = 'aj-ep-';
const CLIENT_PREFIX = 'aj-ck-';
/** Client keys from before expiry and revocation existed; refused with a hint to mint a new one. */
export const LEGACY_CLIENT_PREFIX = 'aj-cl-';
/** A client key lives a month unless asked otherwise: long enough for a study, short enough that a leak ends. */
export const DEFAULT_CLIENT_KEY_TTL_S = 30 * 24 * 3600;
/** The longest a client key may be asked to live (a year). */
export const MAX_CLIENT_KEY_TTL_S = 365 * 24 * 3600;
/** Ids travel inside keys: keep them to characters that need no escaping anywhere. */
const ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
/** What a key carries: an id, or a client name with its expiry and generation in front (a few more characters). */
const KEY_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,160}$/;

function sign(secret: string, prefix: string, id: string): string {
  return createHmac('sha256', Buffer.from(secret, 'hex')).update(prefix + id).digest('base64url');
}

function checkId(id: string): void {
  if (!ID_PATTERN.test(id)) throw new TypeError(`"${id}" cannot be put in a key: use letters, digits and _ . : - (at most 128)`);
}

function mint(secret: string, prefix: string, id: string): string {
  return `${prefix}${id}.${sign(secret, prefix, id)}`;
}

/** The id a key was minted for, or null when the key is malformed or its signature is not this node's. */
function verify(secret: string, prefix: string, key: string): string | null {
  if (!key.startsWith(prefix)) return null;
  const dot = key.lastIndexOf('.');
  if (dot <= prefix.length) return null;
  const id = key.slice(prefix.length, dot);
  if (!KEY_ID_PATTERN.test(id)) return null;
  const given = Buffer.from(key.slice(dot + 1));
  const expected = Buffer.from(sign(secret, prefix, id));
  return given.length === expected.length && timingSafeEqual(given, expected) ? id : null;
}

export function mintEpisodeKey(secret: string, episodeId: string): string {
  checkId(episodeId);
  return mint(secret, EPISODE_PREFIX, episodeId);
}
export function verifyEpisodeKey(secret: string, key: string): string | null {
  const id = verify(secret, EPISODE_PREFIX, key);
  return id !== null && ID_PATTERN.test(id) ? id : null;
}

/** What a valid client key says. */
export interface ClientKeyClaims {
  client: string;
  /** Unix seconds. */
  expiresAt: number;
  /** Keys of a generation below the client's current one are revoked. */
  generation: number;
}

export interface ClientKeyOptions {
  generation?: number;
  ttlS?: number;
  /** Milliseconds since the epoch (tests). */
  now?: number;
}

/**
 * A key for a named client (runner, SDK) allowed to start episodes on /swarm/v1 in its own name, and to end or abort
 * those episodes only.
 */
export function mintClientKey(secret: string, client: string, options: ClientKeyOptions = {}): string {
  checkId(client);
  const ttlS = options.ttlS ?? DEFAULT_CLIENT_KEY_TTL_S;
  if (!(ttlS > 0 && ttlS <= MAX_CLIENT_KEY_TTL_S)) throw new TypeError(`a client key lives from 1 s to ${MAX_CLIENT_KEY_TTL_S} s (a year)`);
  const expiresAt = Math.floor((options.now ?? Date.now()) / 1000 + ttlS);
  const generation = options.generation ?? 0;
  return mint(secret, CLIENT_PREFIX, `${expiresAt.toString(36)}.${generation.toString(36)}.${client}`);
}

/** The claims of a well-signed, unexpired client key; null otherwise (the caller checks the generation). */
export function verifyClientKey(secret: string, key: string, now = Date.now()): ClientKeyClaims | null {
  const id = verify(secret, CLIENT_PREFIX, key);
  if (id === null) return null;
  const [expires, generation] = id.split('.', 2);
  const client = id.slice(expires.length + generation.length + 2);
  const claims = { client, expiresAt: parseInt(expires, 36), generation: parseInt(generation, 36) };
  if (!client || !Number.isSafeInteger(claims.expiresAt) || !Number.isSafeInteger(claims.generation)) return null;
  return claims.expiresAt * 1000 > now ? claims : null;
}
