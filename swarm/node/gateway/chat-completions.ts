/**
 * `POST /v1/chat/completions` for one episode's agent. In order:
 *   1. the API key names the episode (401 otherwise, 409 once it is over);
 *   2. the body is validated (415 unless sent as JSON, 413 when too large, 400 naming the field);
 *   3. `model` must be the episode's model, a host alias or one of the episode's aliases (404), not updating (503 + Retry-After);
 *   4. a prompt that certainly exceeds the context is refused before any rendering (400 context_length_exceeded);
 *      else the tracker renders it (splicing in what earlier calls generated, so tokens never drift);
 *   5. n samples run in the engine's worker thread (continuous batching there), streamed token by token or
 *      gathered into one answer;
 *   6. each sample is recorded as its own call (stored as it completes) before the client gets the last byte.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GenerateResult } from '../../../worker/common/engine.ts';
import type { ChatMessage } from '../../../worker/tokenizer/types.ts';
import { bearerToken } from '../control/auth.ts';
import { episodeModelNames, type EpisodeService, type ActiveEpisode } from '../episodes/episode-service.ts';
import { RETRY_AFTER_S, withEpisodeErrors } from '../episodes/http-errors.ts';
import { HttpError, unavailable } from '../http/errors.ts';
import { parseJsonBody, readBody, requireJsonContentType, sendJson, validate } from '../http/respond.ts';
import type { Logger } from '../log.ts';
import {
  chatCompletionRequestSchema,
  promptTokensAtLeast,
  toChatMessages,
  toToolSpecs,
  stopStrings,
  type ChatCompletionRequest,
} from './chat-request.ts';
import { CompletionChoice } from './completion-choice.ts';
import type { OutputEvent } from './output-stream.ts';
import type { OverheadMeter } from './overhead.ts';
import { samplingFor } from './sampling.ts';
import { SseWriter } from './sse.ts';

/** Requests are messages and tool schemas; 8 MiB holds very long agent histories. */
export const GATEWAY_BODY_LIMIT = 8 * 1024 * 1024;

export interface ChatCompletionsOptions {
  episodes: EpisodeService;
  log: Logger;
  bodyLimit?: number;
  overhead: OverheadMeter;
}

export function createChatCompletionsHandler(options: ChatCompletionsOptions) {
  return async function chatCompletions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const busy = new BusyClock();
    const episode = await withEpisodeErrors(() => busy.time(() => options.episodes.authenticate(bearerToken(req))));
    requireJsonContentType(req);
    const raw = await readBody(req, options.bodyLimit ?? GATEWAY_BODY_LIMIT);
    const body = busy.time(() => validate(chatCompletionRequestSchema, parseJsonBody(raw)));
    const model = episode.model;
    const names = episodeModelNames(episode);
    if (!names.includes(body.model)) {
      const aliases = names.slice(1);
      throw new HttpError(
        404,
        'NotFoundError',
        `model "${body.model}" is not this episode's model; use "${model.name}"${aliases.length ? ` (or an alias: ${aliases.join(', ')})` : ''}`,
        { code: 'model_not_found', field: 'model' },
      );
    }
    if (model.state === 'updating' || model.state === 'loading') {
      throw unavailable(`model "${model.name}" is ${model.state}; retry in ${RETRY_AFTER_S} s`, RETRY_AFTER_S, `model_${model.state}`);
    }
    if (model.state === 'failed') throw new HttpError(503, 'ModelFailedError', `model "${model.name}" failed to load: ${model.error}`, { code: 'model_failed' });

    options.episodes.callStarted(episode);
    try {
      const outcome = await complete(episode, body, req, res, busy);
      if (outcome === 'cancelled') options.episodes.callCancelled(episode);
      else options.overhead.add(busy.ms);
    } finally {
      options.episodes.callEnded(episode);
    }
  };
}

/**
 * The gateway's own time for one call: the synchronous stretches it runs (auth, validation, rendering, recording,
 * answering), so neither generation nor waiting for the network or the event loop counts.
 */
class BusyClock {
  ms = 0;
  private since = 0;

  time<T>(fn: () => T): T {
    const start = performance.now();
    try {
      return fn();
    } finally {
      this.ms += performance.now() - start;
    }
  }

  start(): void {
    this.since = performance.now();
  }

  stop(): void {
    this.ms += performance.now() - this.since;
  }
}

/** Answers one call; 'cancelled' when the client hung up before the answer was complete. */
async function complete(episode: ActiveEpisode, body: ChatCompletionRequest, req: IncomingMessage, res: ServerResponse, busy: BusyClock): Promise<'answered' | 'cancelled'> {
  busy.start();
  const model = episode.model;
  const { tokenizer, engine } = model;
  const messages = toChatMessages(body.messages);
  const contextSize = engine.info.config.max_position_embeddings;
  const atLeast = promptTokensAtLeast(messages, tokenizer, contextSize);
  if (atLeast >= contextSize) throw contextLengthExceeded(`the prompt is at least ${atLeast} tokens`, model.name, contextSize);
  const tools = toToolSpecs(body);
  const rendered = episode.tracker.render(messages, { tools });
  const hermes = model.template.toolCallFormat === 'hermes';
  const forcedPrefix = hermes ? forcedToolCallPrefix(body) : '';
  const forcedPrefixIds = forcedPrefix ? tokenizer.encode(forcedPrefix) : [];
  const promptIds = [...rendered.promptIds, ...forcedPrefixIds];
  if (promptIds.length >= contextSize) throw contextLengthExceeded(`the prompt is ${promptIds.length} tokens`, model.name, contextSize);

  const n = body.n ?? 1;
  const stopTokenIds = tokenizer.eosTokenIds;
  const choices = Array.from(
    { length: n },
    (_, index) =>
      new CompletionChoice({
        index,
        tokenizer,
        stopTokenIds,
        stopStrings: stopStrings(body),
        parseToolCalls: tools !== undefined && hermes,
        forcedPrefix,
        wantLogprobs: body.logprobs === true,
      }),
  );
  const id = `chatcmpl-${randomBytes(12).toString('base64url')}`;
  const created = Math.floor(Date.now() / 1000);
  const sse = body.stream ? new SseWriter(res, { id, created, model: body.model }) : undefined;

  // The client hanging up cancels generation: nobody will read the answer, so it joins no timeline (the episode
  // counts it).
  const cancel = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) cancel.abort();
  };
  res.on('close', onClose);
  req.on('aborted', onClose);

  const emit = (choice: CompletionChoice, events: OutputEvent[]) => {
    if (!sse) return;
    for (const event of events) sse.choiceEvent(choice.index, event, choice.takeLogprobs());
  };
  const startedAt = new Date().toISOString();
  const firstTokens: (string | null)[] = choices.map(() => null);
  let results: GenerateResult[];
  try {
    if (sse) for (const choice of choices) sse.roleChunk(choice.index);
    const generating = Promise.all(
      choices.map((choice, i) => {
        emit(choice, choice.start());
        let firstTokenAt: string | null = null;
        return engine
          .generate(
            {
              promptIds,
              sampling: samplingFor(body, { kind: episode.meta.kind, episode: episode.sampling, stopTokenIds, roomLeft: contextSize - promptIds.length }, i),
            },
            (token) => {
              firstTokenAt ??= new Date().toISOString();
              emit(choice, choice.push(token));
            },
            cancel.signal,
          )
          .then((result) => {
            emit(choice, choice.finish());
            firstTokens[i] = firstTokenAt;
            return result;
          });
      }),
    );
    busy.stop();
    results = await generating;
  } catch (err) {
    if (cancel.signal.aborted) return 'cancelled';
    if (sse) {
      sse.error(err);
      return 'answered';
    }
    throw err;
  } finally {
    res.off('close', onClose);
  }
  if (cancel.signal.aborted) return 'cancelled';
  busy.start();

  const endedAt = new Date().toISOString();
  const assistantMessages: ChatMessage[] = choices.map((c) => c.message());
  choices.forEach((choice, i) => {
    episode.tracker.record({
      messages,
      tools,
      rendered: { ...rendered, promptIds },
      forcedPrefixIds,
      generatedIds: choice.tokens.map((t) => t.id),
      logprobs: choice.tokens.map((t) => t.logprob),
      assistantMessage: assistantMessages[i],
      finishReason: choice.finishReason(results[i]),
      policyVersion: results[i].policyVersion,
      timings: { startedAt, firstTokenAt: firstTokens[i] ?? null, endedAt },
    });
  });
  const completionTokens = choices.reduce((sum, c) => sum + c.tokens.length, 0);
  const usage = { prompt_tokens: promptIds.length, completion_tokens: completionTokens, total_tokens: promptIds.length + completionTokens };
  const fingerprint = `policy-v${Math.max(...results.map((r) => r.policyVersion))}`;

  if (sse) {
    for (const [i, choice] of choices.entries()) sse.finishChunk(choice.index, choice.finishReason(results[i]), choice.takeLogprobs());
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
    system_fingerprint: fingerprint,
    choices: choices.map((choice, i) => ({
      index: choice.index,
      message: { ...assistantMessages[i], refusal: null },
      logprobs: choice.logprobs(),
      finish_reason: choice.finishReason(results[i]),
    })),
    usage,
  });
  busy.stop();
  return 'answered';
}

function contextLengthExceeded(prompt: string, modelName: string, contextSize: number): HttpError {
  return new HttpError(400, 'InvalidRequestError', `${prompt}; model "${modelName}" takes at most ${contextSize - 1} before it answers`, {
    code: 'context_length_exceeded',
    field: 'messages',
  });
}

/**
 * tool_choice 'required' or a named function: the answer is made to start inside a Hermes tool-call block, so the
 * model can only complete a call (the named function's name is written for it). 'auto' and 'none' force nothing
 * ('none' hides the tools from the prompt altogether). Templates without a known tool-call format are not forced.
 */
function forcedToolCallPrefix(body: ChatCompletionRequest): string {
  const choice = body.tool_choice;
  if (choice === 'required') return '<tool_call>\n{"name": "';
  if (typeof choice === 'object') return `<tool_call>\n{"name": ${JSON.stringify(choice.function.name)}, "arguments": `;
  return '';
}
