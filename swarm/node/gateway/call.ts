/**
 * The one path every gateway API takes once its request is chat messages and tools (chat completions, the
 * Responses API, Anthropic's Messages API): model check → context check → render by the tracker (splicing in what
 * earlier calls generated) → n samples in the engine → each sample recorded as its own call. The APIs differ only
 * in how they read a request and present the answer, so an agent trains the same whichever it speaks, and the
 * same conversation renders the same prompt ids through each.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import type { GenerateResult } from '../../../worker/common/engine.ts';
import { parseJsonKeepingSource } from '../../../worker/tokenizer/python-json.ts';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import type { CallRecord } from '../../common/timeline/call.ts';
import { bearerToken } from '../control/auth.ts';
import { episodeModelNames, type ActiveEpisode, type EpisodeService } from '../episodes/episode-service.ts';
import { RETRY_AFTER_S, withEpisodeErrors } from '../episodes/http-errors.ts';
import { HttpError, unavailable } from '../http/errors.ts';
import { parseJsonBody, readBody, requireJsonContentType, validate } from '../http/respond.ts';
import type { RenderedPrompt } from '../tracker/render.ts';
import { promptTokensAtLeast } from './prompt-estimate.ts';
import { CompletionChoice } from './completion-choice.ts';
import type { OutputEvent } from './output-stream.ts';
import type { OverheadMeter } from './overhead.ts';
import { clientSamplingFor, type ClientSampling } from './sampling.ts';

/** Requests are messages and tool schemas; 8 MiB holds very long agent histories. */
export const GATEWAY_BODY_LIMIT = 8 * 1024 * 1024;

/** What the gateway's handlers share: the episodes, the overhead meter and the body cap. */
export interface GatewayContext {
  episodes: EpisodeService;
  overhead: OverheadMeter;
  bodyLimit?: number;
}

/** One API's request, read into the chat form the template renders. */
export interface CallRequest {
  /** The model name the client sent. */
  model: string;
  messages: ChatMessage[];
  /** Undefined when none are declared, or hidden (tool choice 'none'). */
  tools: ToolSpec[] | undefined;
  /** 'any': the answer must be a tool call; a name: a call of that tool. */
  forceTool?: 'any' | { name: string };
  /** The template's thinking switch (Qwen3's `enable_thinking`); undefined leaves the template's default. */
  enableThinking?: boolean;
  /** More template variables (chat completions' `chat_template_kwargs`), checked at the edge. */
  templateKwargs?: Record<string, unknown>;
  n: number;
  wantLogprobs: boolean;
  sampling: ClientSampling;
  /** The request field holding the conversation, named in a context-length error. */
  messagesField: string;
}

/** A request rendered and checked, ready to sample: nothing has been sent to the client yet. */
export interface PreparedCall {
  episode: ActiveEpisode;
  request: CallRequest;
  rendered: RenderedPrompt;
  /** The rendered prompt plus any forced opening: what the engine reads. */
  promptIds: number[];
  forcedPrefix: string;
  forcedPrefixIds: number[];
  contextSize: number;
  /** Text the prompt ends in that the answer continues (an open think block, a forced opening): parsed as generated. */
  parsePrefix: string;
}

export interface CallOutcome {
  choices: CompletionChoice[];
  results: GenerateResult[];
  /** The message each choice recorded (and the client receives). */
  messages: ChatMessage[];
  records: CallRecord[];
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens the engine took from its prefix cache (the least over the samples). */
  cachedPromptTokens: number;
  policyVersion: number;
}

/**
 * The gateway's own time for one call: the synchronous stretches it runs (auth, validation, rendering, recording,
 * answering), so neither generation nor waiting for the network or the event loop counts.
 */
export class BusyClock {
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

/**
 * A dead key (401) or an episode that is over (409) will never succeed: `x-should-retry: false` tells the official
 * clients (openai, @anthropic-ai/sdk) not to retry them, whatever their status would suggest.
 */
export function terminal(err: unknown): unknown {
  if (!(err instanceof HttpError) || (err.status !== 401 && err.status !== 409)) return err;
  return new HttpError(err.status, err.name, err.message, { ...err.details, headers: { ...err.details.headers, 'x-should-retry': 'false' } });
}

/** The episode a key names (401 otherwise, 409 once it is over; both terminal). */
export async function authenticateCall(ctx: GatewayContext, key: string | undefined, busy: BusyClock): Promise<ActiveEpisode> {
  try {
    return await withEpisodeErrors(() => busy.time(() => ctx.episodes.authenticate(key)));
  } catch (err) {
    throw terminal(err);
  }
}

/** The bearer token, or (Anthropic's clients) the `x-api-key` header. */
export function apiKeyOf(req: IncomingMessage): string | undefined {
  const header = req.headers['x-api-key'];
  const apiKey = Array.isArray(header) ? header[0] : header;
  return bearerToken(req) ?? (apiKey || undefined);
}

/** `model` must be the episode's model, a host alias or one of the episode's aliases (404), and servable (503). */
export function checkModel(episode: ActiveEpisode, requested: string): void {
  const model = episode.model;
  const names = episodeModelNames(episode);
  if (!names.includes(requested)) {
    const aliases = names.slice(1);
    throw new HttpError(
      404,
      'NotFoundError',
      `model "${requested}" is not this episode's model; use "${model.name}"${aliases.length ? ` (or an alias: ${aliases.join(', ')})` : ''}`,
      { code: 'model_not_found', field: 'model' },
    );
  }
  if (model.state === 'updating' || model.state === 'loading') {
    throw unavailable(`model "${model.name}" is ${model.state}; retry in ${RETRY_AFTER_S} s`, RETRY_AFTER_S, `model_${model.state}`);
  }
  if (model.state === 'failed') throw new HttpError(503, 'ModelFailedError', `model "${model.name}" failed to load: ${model.error}`, { code: 'model_failed' });
}

/**
 * How every gateway API starts a call: the episode of the key (401/409 before the body is read), the JSON body
 * validated against the API's schema, then the model it names checked against the episode's.
 */
export async function acceptCall<S extends z.ZodType<{ model: string }>>(
  ctx: GatewayContext,
  req: IncomingMessage,
  schema: S,
): Promise<{ busy: BusyClock; episode: ActiveEpisode; body: z.infer<S> }> {
  const busy = new BusyClock();
  const episode = await authenticateCall(ctx, apiKeyOf(req), busy);
  requireJsonContentType(req);
  const raw = await readBody(req, ctx.bodyLimit ?? GATEWAY_BODY_LIMIT);
  const body = busy.time(() => validate(schema, withToolSources(parseJsonBody(raw), raw)));
  checkModel(episode, body.model);
  return { busy, episode, body };
}

/**
 * A body that declares tools is parsed again keeping its JSON source (python-json.ts), so that the template writes
 * the tool schemas with the client's key order and number texts, as the Python renderer does. Only then: the
 * keeping parser is slower than JSON.parse, and nothing else is rendered from parsed JSON.
 */
function withToolSources(parsed: unknown, raw: Buffer): unknown {
  const tools = parsed !== null && typeof parsed === 'object' ? (parsed as { tools?: unknown }).tools : undefined;
  if (!Array.isArray(tools) || tools.length === 0) return parsed;
  return parseJsonKeepingSource(raw.toString('utf8'));
}

export function contextLengthExceeded(prompt: string, modelName: string, contextSize: number, field: string): HttpError {
  return new HttpError(400, 'InvalidRequestError', `${prompt}; model "${modelName}" takes at most ${contextSize - 1} before it answers`, {
    code: 'context_length_exceeded',
    field,
  });
}

/**
 * A prompt that certainly exceeds the context is refused before any rendering (400 context_length_exceeded); else
 * the tracker renders it, and the rendered length is checked again.
 */
export function prepareCall(episode: ActiveEpisode, request: CallRequest): PreparedCall {
  const model = episode.model;
  const { tokenizer, sampler } = model;
  const contextSize = sampler.info.config.max_position_embeddings;
  const atLeast = promptTokensAtLeast(request.messages, tokenizer, contextSize);
  if (atLeast >= contextSize) throw contextLengthExceeded(`the prompt is at least ${atLeast} tokens`, model.name, contextSize, request.messagesField);
  const rendered = episode.tracker.render(request.messages, {
    tools: request.tools,
    enableThinking: request.enableThinking,
    templateKwargs: request.templateKwargs,
  });
  const thinkingOpen = endsInOpenThinkBlock(rendered.text);
  // A forced opening inside an open think block would make the call part of the reasoning: not forced then.
  const forcedPrefix = model.template.toolCallFormat === 'hermes' && request.tools && !thinkingOpen ? forcedToolCallPrefix(request.forceTool) : '';
  const forcedPrefixIds = forcedPrefix ? tokenizer.encode(forcedPrefix) : [];
  const promptIds = [...rendered.promptIds, ...forcedPrefixIds];
  if (promptIds.length >= contextSize) throw contextLengthExceeded(`the prompt is ${promptIds.length} tokens`, model.name, contextSize, request.messagesField);
  return { episode, request, rendered, promptIds, forcedPrefix, forcedPrefixIds, contextSize, parsePrefix: (thinkingOpen ? THINK_OPEN : '') + forcedPrefix };
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';

/** Templates of thinking models (Qwen3-Thinking) open the think block in the generation prompt: the answer starts inside it. */
function endsInOpenThinkBlock(text: string): boolean {
  const open = text.lastIndexOf(THINK_OPEN);
  return open >= 0 && text.slice(open + THINK_OPEN.length).trim() === '' && text.lastIndexOf(THINK_CLOSE) < open;
}

/**
 * A forced tool call: the answer is made to start inside a Hermes tool-call block, so the model can only complete
 * a call (a named tool's name is written for it). Templates without a known tool-call format are not forced.
 */
function forcedToolCallPrefix(force: CallRequest['forceTool']): string {
  if (force === 'any') return '<tool_call>\n{"name": "';
  if (typeof force === 'object') return `<tool_call>\n{"name": ${JSON.stringify(force.name)}, "arguments": `;
  return '';
}

export interface RunHooks {
  /** Right before sampling starts (a stream's headers and opening events). */
  begin?(): void;
  /** What became visible in one choice. */
  events?(choice: CompletionChoice, events: OutputEvent[]): void;
}

/**
 * Samples the prepared call's n choices and records each as a call of the episode. 'cancelled' when the client hung
 * up before the answer was complete: nobody will read it, so it joins no timeline (the episode counts it).
 * Generation errors are thrown (a stream's handler reports them in-band).
 */
export async function runCall(
  prepared: PreparedCall,
  io: { req: IncomingMessage; res: ServerResponse; busy: BusyClock; hooks?: RunHooks },
): Promise<CallOutcome | 'cancelled'> {
  const { episode, request, promptIds } = prepared;
  const { model } = episode;
  const { tokenizer } = model;
  const { req, res, busy, hooks } = io;
  const stopTokenIds = tokenizer.eosTokenIds;
  const choices = Array.from(
    { length: request.n },
    (_, index) =>
      new CompletionChoice({
        index,
        tokenizer,
        stopTokenIds,
        stopStrings: request.sampling.stopStrings,
        parseToolCalls: request.tools !== undefined && episode.model.template.toolCallFormat === 'hermes',
        forcedPrefix: prepared.parsePrefix,
        wantLogprobs: request.wantLogprobs,
      }),
  );

  const cancel = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) cancel.abort();
  };
  res.on('close', onClose);
  req.on('aborted', onClose);

  // The choice must see every token whether or not anyone presents the events (optional chaining would skip it).
  const present = (choice: CompletionChoice, events: OutputEvent[]) => hooks?.events?.(choice, events);
  const startedAt = new Date().toISOString();
  const firstTokens: (string | null)[] = choices.map(() => null);
  let results: GenerateResult[];
  try {
    hooks?.begin?.();
    const generating = Promise.all(
      choices.map((choice, i) => {
        present(choice, choice.start());
        let firstTokenAt: string | null = null;
        return model
          .generate(
            {
              promptIds,
              sampling: clientSamplingFor(
                request.sampling,
                { kind: episode.meta.kind, episode: episode.sampling, stopTokenIds, roomLeft: prepared.contextSize - promptIds.length },
                i,
              ),
            },
            (token) => {
              firstTokenAt ??= new Date().toISOString();
              present(choice, choice.push(token));
            },
            cancel.signal,
          )
          .then((result) => {
            present(choice, choice.finish());
            firstTokens[i] = firstTokenAt;
            return result;
          });
      }),
    );
    busy.stop();
    results = await generating;
  } catch (err) {
    if (cancel.signal.aborted) return 'cancelled';
    throw err;
  } finally {
    res.off('close', onClose);
  }
  if (cancel.signal.aborted) return 'cancelled';
  busy.start();

  const endedAt = new Date().toISOString();
  const messages = choices.map((c) => c.message());
  const records = choices.map((choice, i) =>
    episode.tracker.record({
      messages: request.messages,
      tools: request.tools,
      rendered: { ...prepared.rendered, promptIds },
      forcedPrefixIds: prepared.forcedPrefixIds,
      generatedIds: choice.tokens.map((t) => t.id),
      logprobs: choice.tokens.map((t) => t.logprob),
      assistantMessage: messages[i],
      finishReason: choice.finishReason(results[i]),
      policyVersion: results[i].policyVersion,
      timings: { startedAt, firstTokenAt: firstTokens[i] ?? null, endedAt },
    }),
  );
  return {
    choices,
    results,
    messages,
    records,
    promptTokens: promptIds.length,
    completionTokens: choices.reduce((sum, c) => sum + c.tokens.length, 0),
    cachedPromptTokens: Math.min(...results.map((r) => r.cachedPromptTokens ?? 0)),
    policyVersion: Math.max(...results.map((r) => r.policyVersion)),
  };
}

/**
 * The frame of every gateway call: a call in flight holds the episode's idle timer; a hung-up call is counted on
 * the episode, an answered one adds its overhead to the meter.
 */
export async function inFlight(ctx: GatewayContext, episode: ActiveEpisode, busy: BusyClock, answer: () => Promise<'answered' | 'cancelled'>): Promise<void> {
  ctx.episodes.callStarted(episode);
  try {
    const outcome = await answer();
    if (outcome === 'cancelled') ctx.episodes.callCancelled(episode);
    else ctx.overhead.add(busy.ms);
  } finally {
    ctx.episodes.callEnded(episode);
  }
}
