/**
 * `POST /v1/chat/completions` for one episode's agent. In order:
 *   1. the API key names the episode (401 otherwise, 409 once it is over; both with `x-should-retry: false`);
 *   2. the body is validated (415 unless sent as JSON, 413 when too large, 400 naming the field);
 *   3. `model` must be the episode's model, a host alias or one of the episode's aliases (404), not updating (503 + Retry-After);
 *   4. the shared call path (call.ts): context check, render by the tracker, n samples in the engine's worker
 *      thread (continuous batching there), streamed token by token or gathered into one answer;
 *   5. each sample is recorded as its own call (stored as it completes) before the client gets the last byte.
 * Beyond OpenAI's fields it takes vLLM's `chat_template_kwargs` (template variables, `enable_thinking` among them) and `return_token_ids`
 * (`prompt_token_ids` on the answer, `token_ids` on each choice), and returns reasoning as `reasoning_content`.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ActiveEpisode } from '../episodes/episode-service.ts';
import { sendJson } from '../http/respond.ts';
import type { Logger } from '../log.ts';
import {
  acceptCall,
  type BusyClock,
  GATEWAY_BODY_LIMIT,
  inFlight,
  prepareCall,
  runCall,
  type GatewayContext,
} from './call.ts';
import { chatCompletionRequestSchema, toCallRequest, type ChatCompletionRequest } from './chat-request.ts';
import type { CompletionChoice } from './completion-choice.ts';
import type { OverheadMeter } from './overhead.ts';
import { SseWriter } from './sse.ts';

export { GATEWAY_BODY_LIMIT };

export interface ChatCompletionsOptions {
  episodes: GatewayContext['episodes'];
  log: Logger;
  bodyLimit?: number;
  overhead: OverheadMeter;
}

export function createChatCompletionsHandler(options: ChatCompletionsOptions) {
  return async function chatCompletions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { busy, episode, body } = await acceptCall(options, req, chatCompletionRequestSchema);
    await inFlight(options, episode, busy, () => complete(episode, body, req, res, busy));
  };
}

/** Answers one call; 'cancelled' when the client hung up before the answer was complete. */
async function complete(episode: ActiveEpisode, body: ChatCompletionRequest, req: IncomingMessage, res: ServerResponse, busy: BusyClock): Promise<'answered' | 'cancelled'> {
  busy.start();
  const prepared = prepareCall(episode, toCallRequest(body));
  const tokenIds = body.return_token_ids === true;
  const id = `chatcmpl-${randomBytes(12).toString('base64url')}`;
  const created = Math.floor(Date.now() / 1000);
  const sse = body.stream ? new SseWriter(res, { id, created, model: body.model }, { tokenIds }) : undefined;

  let outcome: Awaited<ReturnType<typeof runCall>>;
  try {
    outcome = await runCall(prepared, {
      req,
      res,
      busy,
      hooks: sse && {
        begin: () => {
          for (let index = 0; index < prepared.request.n; index++) sse.roleChunk(index, tokenIds ? prepared.promptIds : undefined);
        },
        events: (choice: CompletionChoice, events) => {
          for (const event of events) sse.choiceEvent(choice.index, event, choice.takeLogprobs(), choice.takeTokenIds());
        },
      },
    });
  } catch (err) {
    if (!sse) throw err;
    sse.error(err);
    return 'answered';
  }
  if (outcome === 'cancelled') return 'cancelled';
  const { choices, results, messages } = outcome;
  const usage = {
    prompt_tokens: outcome.promptTokens,
    completion_tokens: outcome.completionTokens,
    total_tokens: outcome.promptTokens + outcome.completionTokens,
    prompt_tokens_details: { cached_tokens: outcome.cachedPromptTokens },
  };

  if (sse) {
    for (const [i, choice] of choices.entries()) sse.finishChunk(choice.index, choice.finishReason(results[i]), choice.takeLogprobs(), choice.takeTokenIds());
    if (body.stream_options?.include_usage) sse.usageChunk(usage);
    sse.done();
    busy.stop();
    return 'answered';
  }
  sendJson(res, 200, {
    id,
    object: 'chat.completion',
    created,
    model: body.model,
    system_fingerprint: `policy-v${outcome.policyVersion}`,
    ...(tokenIds ? { prompt_token_ids: prepared.promptIds } : {}),
    choices: choices.map((choice, i) => ({
      index: choice.index,
      message: { ...messages[i], refusal: null },
      logprobs: choice.logprobs(),
      finish_reason: choice.finishReason(results[i]),
      ...(tokenIds ? { token_ids: choice.tokens.map((t) => t.id) } : {}),
    })),
    usage,
  });
  busy.stop();
  return 'answered';
}
