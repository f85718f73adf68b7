/**
 * Episode keys and client keys: `<prefix><id>.<HMAC-SHA256(prefix + id, node secret)>` in base64url.
 * Only this node can mint them (the secret never leaves it), so a key cannot be forged or moved to another
 * episode; an episode key also dies with its episode (the episode service refuses keys of finished episodes).
 * Verification is constant-time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const EPISODE_PREFIX = 'aj-ep-';
const CLIENT_PREFIX = 'aj-cl-';
/** Ids travel inside keys: keep them to characters that need no escaping anywhere. */
const ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

function sign(secret: string, prefix: string, id: string): string {
  return createHmac('sha256', Buffer.from(secret, 'hex')).update(prefix + id).digest('base64url');
}

function mint(secret: string, prefix: string, id: string): string {
  if (!ID_PATTERN.test(id)) throw new TypeError(`"${id}" cannot be put in a key: use letters, digits and _ . : - (at most 128)`);
  return `${prefix}${id}.${sign(secret, prefix, id)}`;
}

/** The id a key was minted for, or null when the key is malformed or its signature is not this node's. */
function verify(secret: string, prefix: string, key: string): string | null {
  if (!key.startsWith(prefix)) return null;
  const dot = key.lastIndexOf('.');
  if (dot <= prefix.length) return null;
  const id = key.slice(prefix.length, dot);
  if (!ID_PATTERN.test(id)) return null;
  const given = Buffer.from(key.slice(dot + 1));
  const expected = Buffer.from(sign(secret, prefix, id));
  return given.length === expected.length && timingSafeEqual(given, expected) ? id : null;
}

export const mintEpisodeKey = (secret: string, episodeId: string) => mint(secret, EPISODE_PREFIX, episodeId);
export const verifyEpisodeKey = (secret: string, key: string) => verify(secret, EPISODE_PREFIX, key);

/** A long-lived key for a named client (runner, SDK) allowed to start and end episodes on /swarm/v1. */
export const mintClientKey = (secret: string, clientName: string) => mint(secret, CLIENT_PREFIX, clientName);
export const verifyClientKey = (secret: string, key: string) => verify(secret, CLIENT_PREFIX, key);
