/**
 * A swarm token: everything a lab machine needs to join a private swarm, as one copy-pasteable string.
 * Format: `ajs1.` + base64url(JSON {v: 1, name, key, bootstrap}). `key` is the 32-byte pre-shared key in hex;
 * whoever holds the token can join, so it is shared like a password.
 */
import { generateKey } from '@libp2p/pnet';
import { multiaddr } from '@multiformats/multiaddr';
import { z } from 'zod';
import { InvalidSwarmTokenError } from './errors.ts';

export const SWARM_TOKEN_PREFIX = 'ajs1.';
const TOKEN_VERSION = 1;
/** A token carries a name and a few addresses; anything longer is not a token. */
const MAX_TOKEN_CHARS = 16_384;
/** Bytes of the pnet key file: header lines plus 64 hex digits. */
const PSK_FILE_BYTES = 95;

export const SwarmName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-zA-Z0-9][a-zA-Z0-9._-]*$/, 'letters, digits, dot, dash, underscore');

const SwarmKeyHex = z.string().regex(/^[0-9a-f]{64}$/, '32 bytes of lowercase hex');

const TokenPayload = z.object({
  v: z.literal(TOKEN_VERSION),
  name: SwarmName,
  key: SwarmKeyHex,
  bootstrap: z.array(z.string().max(512)).max(64),
});

export interface SwarmSecret {
  name: string;
  /** 64 hex digits: the pnet pre-shared key. */
  key: string;
}

export interface SwarmToken extends SwarmSecret {
  bootstrap: string[];
}

/** A fresh random pre-shared key, as 64 hex digits. */
export function generateSwarmKey(): string {
  const file = new Uint8Array(PSK_FILE_BYTES);
  generateKey(file);
  return new TextDecoder().decode(file).split('\n').at(-1) ?? '';
}

/** The key in the file format `@libp2p/pnet` expects. */
export function swarmKeyToPsk(keyHex: string): Uint8Array {
  return new TextEncoder().encode(`/key/swarm/psk/1.0.0/\n/base16/\n${SwarmKeyHex.parse(keyHex)}`);
}

/** Make a token for a new swarm (fresh key) or for an existing one (pass its key). */
export function createSwarmToken(init: { name: string; bootstrap?: string[]; key?: string }): string {
  const payload = { v: TOKEN_VERSION, name: init.name, key: init.key ?? generateSwarmKey(), bootstrap: init.bootstrap ?? [] };
  const checked = TokenPayload.safeParse(payload);
  if (!checked.success) throw new InvalidSwarmTokenError(checked.error.issues[0]?.message ?? 'invalid swarm');
  for (const address of checked.data.bootstrap) checkMultiaddr(address);
  return SWARM_TOKEN_PREFIX + Buffer.from(JSON.stringify(checked.data)).toString('base64url');
}

export function parseSwarmToken(token: string): SwarmToken {
  const trimmed = token.trim();
  if (trimmed.length > MAX_TOKEN_CHARS) throw new InvalidSwarmTokenError('token is too long');
  if (!trimmed.startsWith(SWARM_TOKEN_PREFIX)) throw new InvalidSwarmTokenError(`token must start with ${SWARM_TOKEN_PREFIX}`);
  const body = trimmed.slice(SWARM_TOKEN_PREFIX.length);
  if (!/^[A-Za-z0-9_-]+$/.test(body)) throw new InvalidSwarmTokenError('token is not base64url');
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidSwarmTokenError('token does not decode to JSON');
  }
  const parsed = TokenPayload.safeParse(json);
  if (!parsed.success) throw new InvalidSwarmTokenError(parsed.error.issues[0]?.message ?? 'invalid token');
  for (const address of parsed.data.bootstrap) checkMultiaddr(address);
  return { name: parsed.data.name, key: parsed.data.key, bootstrap: parsed.data.bootstrap };
}

function checkMultiaddr(address: string): void {
  try {
    multiaddr(address);
  } catch {
    throw new InvalidSwarmTokenError(`not a multiaddr: ${address}`);
  }
}
