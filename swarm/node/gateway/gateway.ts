/**
 * The OpenAI-compatible gateway (/v1): what agent scripts talk to, with an episode's API key.
 *   GET  /v1/models             the hosted models (names and aliases)
 *   POST /v1/chat/completions   chat-completions.ts
 * Errors are rendered in OpenAI's shape by the HTTP server (mount errorShape 'openai').
 */
import { bearerToken } from '../control/auth.ts';
import type { EpisodeService } from '../episodes/episode-service.ts';
import { withEpisodeErrors } from '../episodes/http-errors.ts';
import { sendJson } from '../http/respond.ts';
import { Router } from '../http/router.ts';
import type { Logger } from '../log.ts';
import type { ModelHost } from '../models/model-host.ts';
import { createChatCompletionsHandler } from './chat-completions.ts';
import { OverheadMeter } from './overhead.ts';

export interface GatewayOptions {
  episodes: EpisodeService;
  models: ModelHost;
  log: Logger;
  bodyLimit?: number;
}

export interface Gateway {
  router: Router;
  /** Gateway time per call, generation excluded (read by bench/gateway.ts). */
  overhead: OverheadMeter;
}

export function createGateway(options: GatewayOptions): Gateway {
  const overhead = new OverheadMeter();
  const router = new Router();
  router.get('/v1/models', async (req, res) => {
    await withEpisodeErrors(() => options.episodes.authenticate(bearerToken(req)));
    const data = options.models.models.flatMap((model) =>
      model.names.map((id) => ({ id, object: 'model', created: 0, owned_by: 'agentjet', root: model.name })),
    );
    sendJson(res, 200, { object: 'list', data });
  });
  router.post('/v1/chat/completions', createChatCompletionsHandler({ episodes: options.episodes, log: options.log, bodyLimit: options.bodyLimit, overhead }));
  return { router, overhead };
}
