/**
 * The swarm protocol over HTTP (/swarm/v1), for runners and SDKs:
 *   POST /swarm/v1/episodes              start an episode → { episodeId, baseUrl, apiKey, model, policyVersion }
 *   POST /swarm/v1/episodes/:id/end      { reward, success?, metrics? } → stored (one transaction) before the answer
 *   POST /swarm/v1/episodes/:id/abort    { reason } → never trained on
 *   GET  /swarm/v1/status                engine state, pool, step and policy version per model
 * Auth: the control token, or a client key (mintClientKey). Answers: 404 unknown model or episode, 409 episode
 * over (late results are refused), 429 pool full, 503 + Retry-After while the model drains or updates.
 */
import type { IncomingMessage } from 'node:http';
import {
  abortEpisodeRequestSchema,
  createEpisodeRequestSchema,
  endEpisodeRequestSchema,
  type SwarmStatusResponse,
} from '../../common/swarm-api.ts';
import { bearerToken, tokensEqual } from '../control/auth.ts';
import { unauthorized } from '../http/errors.ts';
import { readValidated, sendJson } from '../http/respond.ts';
import { Router } from '../http/router.ts';
import type { ModelHost } from '../models/model-host.ts';
import type { EpisodeService } from './episode-service.ts';
import { withEpisodeErrors } from './http-errors.ts';
import { verifyClientKey } from './keys.ts';

/** Episode payloads are small; results with big metrics still fit. */
const SWARM_BODY_LIMIT = 1024 * 1024;

export interface SwarmRoutesOptions {
  episodes: EpisodeService;
  models: ModelHost;
  controlToken: string;
  secret: string;
  nodeId: string;
}

export function createSwarmRouter(options: SwarmRoutesOptions): Router {
  const authorize = (req: IncomingMessage): void => {
    const given = bearerToken(req);
    if (!given) throw unauthorized('missing bearer token; send the control token or a client key (agentjet client-key NAME)');
    if (tokensEqual(given, options.controlToken) || verifyClientKey(options.secret, given)) return;
    throw unauthorized('invalid token for /swarm/v1: not this peer\'s control token or one of its client keys');
  };
  const router = new Router();

  router.post('/swarm/v1/episodes', async (req, res) => {
    authorize(req);
    const body = await readValidated(req, createEpisodeRequestSchema, SWARM_BODY_LIMIT);
    sendJson(res, 201, await withEpisodeErrors(() => options.episodes.create(body)));
  });

  router.post('/swarm/v1/episodes/:id/end', async (req, res, ctx) => {
    authorize(req);
    const body = await readValidated(req, endEpisodeRequestSchema, SWARM_BODY_LIMIT);
    sendJson(res, 200, await withEpisodeErrors(() => options.episodes.end(ctx.params.id, body)));
  });

  router.post('/swarm/v1/episodes/:id/abort', async (req, res, ctx) => {
    authorize(req);
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
