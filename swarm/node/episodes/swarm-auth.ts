/**
 * Who is calling /swarm/v1 (the local routes and the swarm's relays alike): the peer's control token (acts on every
 * episode), or a client key (acts in its own client's name, on its own client's episodes only). Anything else is
 * 401 with what to send instead.
 */
import type { IncomingMessage } from 'node:http';
import { bearerToken, tokensEqual } from '../control/auth.ts';
import { HttpError, unauthorized } from '../http/errors.ts';
import { LEGACY_CLIENT_PREFIX, verifyClientKey } from './keys.ts';

export type SwarmCaller = { kind: 'control' } | { kind: 'client'; client: string };

export interface SwarmAuthOptions {
  controlToken: string;
  secret: string;
  /** The client's current key generation (store/client-keys.ts); keys of older generations are revoked. */
  generationOf: (client: string) => number;
}

export function swarmAuthorizer(options: SwarmAuthOptions): (req: IncomingMessage) => SwarmCaller {
  return (req) => {
    const given = bearerToken(req);
    if (!given) throw unauthorized('missing bearer token; send the control token or a client key (agentjet client-key NAME)');
    if (tokensEqual(given, options.controlToken)) return { kind: 'control' };
    if (given.startsWith(LEGACY_CLIENT_PREFIX)) {
      throw unauthorized('this client key has the old format, which never expires; mint a new one with agentjet client-key NAME');
    }
    const claims = verifyClientKey(options.secret, given);
    if (!claims) {
      throw unauthorized("invalid or expired token for /swarm/v1: not this peer's control token or a live client key (agentjet client-key NAME)");
    }
    if (claims.generation < options.generationOf(claims.client)) {
      throw unauthorized(`the keys of client "${claims.client}" were revoked; mint a new one with agentjet client-key ${claims.client}`);
    }
    return { kind: 'client', client: claims.client };
  };
}

/** A client key begins episodes in its own name only: the request's `client`, if given, must be that name. */
export function clientForNewEpisode(caller: SwarmCaller, requested: string | undefined): string | undefined {
  if (caller.kind === 'control') return requested;
  if (requested !== undefined && requested !== caller.client) {
    throw new HttpError(403, 'ForbiddenError', `a key of client "${caller.client}" cannot begin episodes for client "${requested}"`, {
      code: 'client_mismatch',
      field: 'client',
    });
  }
  return caller.client;
}

/**
 * A client key ends and aborts its own client's episodes only. `owner` is the episode's client: null when it was begun
 * without one, undefined when there is no such episode (left to the episode service's 404).
 */
export function requireOwnEpisode(caller: SwarmCaller, episodeId: string, owner: string | null | undefined): void {
  if (caller.kind === 'control' || owner === undefined || owner === caller.client) return;
  throw new HttpError(403, 'ForbiddenError', `episode ${episodeId} was not begun by client "${caller.client}"; its own key or the control token may end it`, {
    code: 'not_your_episode',
  });
}
