/**
 * The gateway (/v1): what agent scripts talk to, with an episode's API key.
 *   GET  /v1/models                     the hosted models (names and aliases; Anthropic's shape for its clients)
 *   POST /v1/chat/completions           chat-completions.ts (OpenAI)
 *   POST /v1/responses                  responses.ts (OpenAI's Responses API)
 *   POST /v1/messages                   messages.ts (Anthropic's Messages API)
 *   POST /v1/messages/count_tokens      messages.ts
 * Every API turns its request into chat messages and tools and takes the one call path (call.ts). Errors are
 * rendered in OpenAI's shape by the HTTP server (mount errorShape 'openai'), except under /v1/messages, where the
 * handlers answer them in Anthropic's shape themselves (the router's 404 and 405 there included). Routes match
 * whatever the query (`?beta=true`, as Claude Code sends it).
 */
import type { EpisodeService } from '../episodes/episode-service.ts';
import { withEpisodeErrors } from '../episodes/http-errors.ts';
import { HttpError } from '../http/errors.ts';
import { sendJson } from '../http/respond.ts';
import { Router } from '../http/router.ts';
import type { Logger } from '../log.ts';
import type { ModelHost } from '../models/model-host.ts';
import { apiKeyOf, type GatewayContext } from './call.ts';
import { createChatCompletionsHandler } from './chat-completions.ts';
import { createCountTokensHandler, createMessagesHandler, unknownMessagesRoute, withAnthropicErrors } from './messages.ts';
import { OverheadMeter } from './overhead.ts';
import { ResponseIndex, createResponsesHandler } from './responses.ts';

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

/** Methods answered under /v1/messages besides POST, so that they get Anthropic's error shape too. */
const OTHER_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE'];

export function createGateway(options: GatewayOptions): Gateway {
  const overhead = new OverheadMeter();
  const ctx: GatewayContext = { episodes: options.episodes, overhead, bodyLimit: options.bodyLimit };
  const router = new Router();
  router.get('/v1/models', async (req, res) => {
    await withEpisodeErrors(() => options.episodes.authenticate(apiKeyOf(req)));
    const names = options.models.models.flatMap((model) => model.names.map((id) => ({ id, root: model.name })));
    // Anthropic's clients send anthropic-version and read Anthropic's list shape.
    if (req.headers['anthropic-version'] !== undefined) {
      const data = names.map(({ id }) => ({ type: 'model', id, display_name: id, created_at: new Date(0).toISOString() }));
      sendJson(res, 200, { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
      return;
    }
    sendJson(res, 200, { object: 'list', data: names.map(({ id, root }) => ({ id, object: 'model', created: 0, owned_by: 'agentjet', root })) });
  });
  router.post('/v1/chat/completions', createChatCompletionsHandler({ episodes: options.episodes, log: options.log, bodyLimit: options.bodyLimit, overhead }));
  router.post('/v1/responses', createResponsesHandler(ctx, new ResponseIndex()));

  const anthropic = (handler: Parameters<typeof withAnthropicErrors>[1]) => withAnthropicErrors(options.log, handler);
  router.post('/v1/messages', anthropic(createMessagesHandler(ctx)));
  router.post('/v1/messages/count_tokens', anthropic(createCountTokensHandler(ctx)));
  for (const method of OTHER_METHODS) {
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      router.add(method, path, anthropic((req) => {
        throw new HttpError(405, 'MethodNotAllowedError', `${req.method} is not allowed on ${path}; use POST`, { code: 'method_not_allowed' });
      }));
    }
  }
  for (const method of ['POST', ...OTHER_METHODS]) router.add(method, '/v1/messages/:rest', anthropic(unknownMessagesRoute));
  return { router, overhead };
}
