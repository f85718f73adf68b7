/**
 * The swarm protocol over HTTP (/swarm/v1), for runners and SDKs:
 *   POST /swarm/v1/episodes              start an episode → { episodeId, baseUrl, apiKey, model, policyVersion }
 *   POST /swarm/v1/episodes/:id/end      { reward, success?, metrics? } → stored (one transaction) before the answer
 *   POST /swarm/v1/episodes/:id/abort    { reason } → never trained on
 *   GET  /swarm/v1/status                engine state, pool, step and policy version per model
 * Auth: the control token, or a client key (swarm-auth.ts: in its own client's name, on its own episodes). Answers: 404 unknown model or episode, 409 episode
 * over (late results are refused), 429 pool full, 503 + Retry-After while the model drains or updates. A train begin
 * beyond the staleness bound of asynchronous training is held until the bound admits it, and answered 429
 * staleness_bound only when it did not within the model's admissionHoldMs.
 */
import type { ServerResponse } from 'node:http';
import {
  abortEpisodeRequestSchema,
  type CreateEpisodeRequest,
  createEpisodeRequestSchema,
  endEpisodeRequestSchema,
  type SwarmStatusResponse,
} from '../../common/swarm-api.ts';
import { readValidated, sendJson } from '../http/respond.ts';
import { Router } from '../http/router.ts';
import type { ModelHost } from '../models/model-host.ts';
import type { EpisodeService } from './episode-service.ts';
import { withEpisodeErrors } from './http-errors.ts';
import { clientForNewEpisode, requireOwnEpisode, swarmAuthorizer } from './swarm-auth.ts';

/** A held begin whose client hung up: nobody is left to answer. */
class BeginAbandonedError extends Error {
  override name = 'BeginAbandonedError';
}

/**
 * Begins an episode for an HTTP request and answers 201 with it. A train begin beyond the staleness bound waits for
 * it (bounded: createWhenAdmitted); a client that hangs up meanwhile is never admitted, and gets no answer.
 */
export async function beginAnswering(res: ServerResponse, episodes: EpisodeService, request: CreateEpisodeRequest): Promise<void> {
  const gone = new AbortController();
  const onClose = () => gone.abort(new BeginAbandonedError('the client closed the connection before its episode was admitted'));
  res.once('close', onClose);
  try {
    sendJson(res, 201, await withEpisodeErrors(() => episodes.createWhenAdmitted(request, gone.signal)));
  } catch (err) {
    // Nobody is left to answer, and nothing was admitted.
    if (err instanceof BeginAbandonedError) return;
    throw err;
  } finally {
    res.off('close', onClose);
  }
}

/** Episode payloads are small; results with big metrics still fit. */
const SWARM_BODY_LIMIT = 1024 * 1024;

export interface SwarmRoutesOptions {
  episodes: EpisodeService;
  models: ModelHost;
  controlToken: string;
  secret: string;
  nodeId: string;
  /** The client's current key generation (store/client-keys.ts). */
  generationOf: (client: string) => number;
  /** The client an episode was begun for: null when none, undefined when there is no such episode. */
  clientOf: (episodeId: string) => string | null | undefined;
}

export function createSwarmRouter(options: SwarmRoutesOptions): Router {
  const authorize = swarmAuthorizer(options);
  const router = new Router();

  router.post('/swarm/v1/episodes', async (req, res) => {
    const caller = authorize(req);
    const body = await readValidated(req, createEpisodeRequestSchema, SWARM_BODY_LIMIT);
    await beginAnswering(res, options.episodes, { ...body, client: clientForNewEpisode(caller, body.client) });
  });

  router.post('/swarm/v1/episodes/:id/end', async (req, res, ctx) => {
    requireOwnEpisode(authorize(req), ctx.params.id, options.clientOf(ctx.params.id));
    const body = await readValidated(req, endEpisodeRequestSchema, SWARM_BODY_LIMIT);
    sendJson(res, 200, await withEpisodeErrors(() => options.episodes.end(ctx.params.id, body)));
  });

  router.post('/swarm/v1/episodes/:id/abort', async (req, res, ctx) => {
    requireOwnEpisode(authorize(req), ctx.params.id, options.clientOf(ctx.params.id));
    const body = await readValidated(req, abortEpisodeRequestSchema, SWARM_BODY_LIMIT);
    sendJson(res, 200, await withEpisodeErrors(() => options.episodes.abort(ctx.params.id, body.reason)));
  });

  router.get('/swarm/v1/status', (req, res) => {
    authorize(req);
    const status: SwarmStatusResponse = {
      nodeId: options.nodeId,
      models: options.models.models.map((m) => ({ ...m.status(), aliases: [...m.aliases] })),
      episodes: { active: options.episodes.activeCount },
    };
    sendJson(res, 200, status);
  });
  return router;
}
