/** Named errors of the swarm glue (tests and clients match on `name`). */
import { HttpError } from '../http/errors.ts';

export class SwarmConfigError extends Error {
  override name = 'SwarmConfigError';
}

/** The server peer hosting a remote episode left the swarm (or stopped answering): the episode is over. */
export function peerGone(episodeId: string, peerId: string, why: string): HttpError {
  return new HttpError(
    502,
    'PeerGoneError',
    `the server peer ${peerId} hosting episode ${episodeId} is gone (${why}); the episode was aborted, start a new episode`,
    { code: 'peer_gone' },
  );
}

/** No peer in the swarm announces the model (and it is not hosted here). */
export function noPeerHosts(model: string, known: string[]): HttpError {
  return new HttpError(
    404,
    'NotFoundError',
    `no hosted model is called "${model}", here or on a swarm peer; the swarm serves: ${known.join(', ') || 'none'}`,
    { code: 'model_not_found', field: 'model' },
  );
}

/** How long a client waits before asking again for a model whose server is away (a restart takes seconds). */
export const NO_SERVER_RETRY_AFTER_S = 5;

/** The swarm served the model and has no server for it right now: retryable, the client waits. */
export function noServerNow(model: string): HttpError {
  return new HttpError(
    503,
    'NoServerNowError',
    `no server for model "${model}" right now (its server peer is away); retry in ${NO_SERVER_RETRY_AFTER_S} s`,
    { code: 'no_server_now', field: 'model', headers: { 'retry-after': String(NO_SERVER_RETRY_AFTER_S) } },
  );
}
