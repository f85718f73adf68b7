/**
 * How episode and model-host errors become HTTP answers, for the gateway (OpenAI's shape) and /swarm/v1 alike.
 *
 * Pool full is 429 (rate_limit_error): the request is fine and will succeed later, which is what 429 means to
 * clients and their retry logic; 409 would say the request conflicts with the resource's state, and is kept for
 * episodes that are over.
 */
import { HttpError, conflict, notFound, unauthorized, unavailable } from '../http/errors.ts';
import { AdmissionThrottledError, ModelNotReadyError, PoolFullError } from '../models/model-host.ts';
import { EpisodeError } from './episode-service.ts';

/** How long a client should wait while a model drains or updates: one small update usually fits. */
export const RETRY_AFTER_S = 5;

/** How long a train episode refused by the staleness bound should wait: the next step frees room, usually soon. */
export const THROTTLED_RETRY_AFTER_S = 1;

export function episodeHttpError(err: unknown): unknown {
  if (err instanceof PoolFullError) {
    return new HttpError(429, 'PoolFullError', err.message, { code: 'pool_full', headers: { 'Retry-After': String(RETRY_AFTER_S) } });
  }
  if (err instanceof AdmissionThrottledError) {
    // Like pool full: the request is fine and succeeds once a step has taken the episodes ahead of it.
    return new HttpError(429, 'AdmissionThrottledError', err.message, { code: 'staleness_bound', headers: { 'Retry-After': String(THROTTLED_RETRY_AFTER_S) } });
  }
  if (err instanceof ModelNotReadyError) {
    if (err.state === 'failed') return new HttpError(503, 'ModelFailedError', `${err.message}; see GET /api/models for the reason`, { code: 'model_failed' });
    return unavailable(`${err.message}; retry in ${RETRY_AFTER_S} s`, RETRY_AFTER_S, `model_${err.state}`);
  }
  if (!(err instanceof EpisodeError)) return err;
  switch (err.name) {
    case 'InvalidEpisodeKeyError':
      return unauthorized(err.message);
    case 'ExpiredEpisodeKeyError':
      return new HttpError(401, 'AuthenticationError', err.message, { code: 'expired_api_key' });
    case 'EpisodeNotActiveError':
      return conflict(err.message, 'episode_not_active');
    case 'UnknownEpisodeError':
      return notFound(err.message, 'episode_not_found');
    case 'UnknownModelError':
      return new HttpError(404, 'NotFoundError', err.message, { code: 'model_not_found', field: 'model' });
  }
}

/** Runs `fn`, turning episode errors into HTTP errors. */
export async function withEpisodeErrors<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw episodeHttpError(err);
  }
}
