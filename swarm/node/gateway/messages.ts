/**
 * Anthropic's Messages API for one episode's agent: `POST /v1/messages` and `POST /v1/messages/count_tokens`.
 * The key comes as `x-api-key` (the official SDK 0.x, curl, the AI SDK) or `Authorization: Bearer` (SDK 1.x,
 * Claude Code with ANTHROPIC_AUTH_TOKEN); any `anthropic-version` and `anthropic-beta` are accepted. The request
 * becomes chat messages and tools and takes the one call path (call.ts), so a Claude-style agent is rendered,
 * recorded and merged exactly like a chat-completions one. Every error, the router's included, is answered in
 * Anthropic's shape `{"type":"error","error":{"type","message"}}` with its type matching the status.
 *
 * The mapping to chat messages: `system` (string or text blocks, `cache_control` ignored) and mid-conversation
 * `role: "system"` messages become system messages; a user message's `tool_result` blocks become tool messages (in
 * order, before the user's text); an assistant message's `thinking` blocks become its reasoning, `text` blocks its
 * content and `tool_use` blocks its tool calls. Text blocks of one message are joined with a newline.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GenerateResult } from '../../../worker/common/engine.ts';
import { jsonTextKeepingSource } from '../../../worker/tokenizer/python-json.ts';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import {
  anthropicCountTokensRequestSchema,
  anthropicMessagesRequestSchema,
  isClientTool,
  type AnthropicContentBlock,
  type AnthropicCountTokensRequest,
  type AnthropicMessagesRequest,
  type AnthropicStopReason,
} from '../../common/anthropic-api.ts';
import type { ActiveEpisode } from '../episodes/episode-service.ts';
import { HttpError, notFound } from '../http/errors.ts';
import { sendJson } from '../http/respond.ts';
import type { Handler } from '../http/router.ts';
import { sendError } from '../http/server.ts';
import type { Logger } from '../log.ts';
import {
  acceptCall,
  type BusyClock,
  inFlight,
  prepareCall,
  runCall,
  type CallRequest,
  type GatewayContext,
} from './call.ts';
import type { CompletionChoice } from './completion-choice.ts';
import { AnthropicSseWriter } from './messages-stream.ts';

const TEXT_JOINER = '\n';

/**
 * Answers every error of `handler` in Anthropic's shape: the /v1 mount renders OpenAI's, and Anthropic's clients
 * read `error.type` to decide what went wrong.
 */
export function withAnthropicErrors(log: Logger, handler: Handler): Handler {
  return async function anthropicErrors(req, res, ctx) {
    try {
      await handler(req, res, ctx);
    } catch (err) {
      sendError(res, 'anthropic', err, log);
    }
  };
}

/** Paths under /v1/messages that are not routes: Anthropic's 404 rather than the /v1 mount's OpenAI-shaped one. */
export function unknownMessagesRoute(req: IncomingMessage): never {
  throw notFound(`no route ${req.method} ${req.url?.split('?')[0]}; the Messages API has POST /v1/messages and POST /v1/messages/count_tokens`, 'unknown_url');
}

export function createMessagesHandler(ctx: GatewayContext) {
  return async function messages(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { busy, episode, body } = await acceptCall(ctx, req, anthropicMessagesRequestSchema);
    await inFlight(ctx, episode, busy, () => answer(episode, body, req, res, busy));
  };
}

export function createCountTokensHandler(ctx: GatewayContext) {
  return async function countTokens(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { episode, body } = await acceptCall(ctx, req, anthropicCountTokensRequestSchema);
    const conversation = toConversation(body);
    // Rendered as the call would be (splicing included), and recorded nowhere.
    const rendered = episode.tracker.render(conversation.messages, { tools: conversation.tools, enableThinking: conversation.enableThinking });
    sendJson(res, 200, { input_tokens: rendered.promptIds.length });
  };
}

async function answer(episode: ActiveEpisode, body: AnthropicMessagesRequest, req: IncomingMessage, res: ServerResponse, busy: BusyClock): Promise<'answered' | 'cancelled'> {
  busy.start();
  const prepared = prepareCall(episode, toCallRequest(body));
  const id = `msg_${randomBytes(12).toString('base64url')}`;
  const sse = body.stream ? new AnthropicSseWriter(res) : undefined;
  let outcome: Awaited<ReturnType<typeof runCall>>;
  try {
    outcome = await runCall(prepared, {
      req,
      res,
      busy,
      hooks: sse && {
        begin: () => sse.start({ id, model: body.model, inputTokens: prepared.promptIds.length }),
        events: (_choice, events) => {
          for (const event of events) sse.event(event);
        },
      },
    });
  } catch (err) {
    if (!sse) throw err;
    sse.error(err);
    return 'answered';
  }
  if (outcome === 'cancelled') return 'cancelled';
  const [choice] = outcome.choices;
  const reason = stopReason(choice, outcome.results[0]);
  const stopSequence = reason === 'stop_sequence' ? choice.stopString : null;
  if (sse) {
    sse.finish(reason, stopSequence, outcome.completionTokens);
  } else {
    sendJson(res, 200, {
      id,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: contentBlocks(outcome.messages[0]),
      stop_reason: reason,
      stop_sequence: stopSequence,
      usage: { input_tokens: outcome.promptTokens, output_tokens: outcome.completionTokens },
    });
  }
  busy.stop();
  return 'answered';
}

export function stopReason(choice: CompletionChoice, result: GenerateResult): AnthropicStopReason {
  const finish = choice.finishReason(result);
  if (finish === 'tool_calls') return 'tool_use';
  if (finish === 'length') return 'max_tokens';
  return choice.stopString !== null ? 'stop_sequence' : 'end_turn';
}

/** The assistant message as Anthropic's content blocks: thinking, text, then tool uses. */
export function contentBlocks(message: ChatMessage): Record<string, unknown>[] {
  const blocks: Record<string, unknown>[] = [];
  if (message.reasoning_content) blocks.push({ type: 'thinking', thinking: message.reasoning_content, signature: '' });
  if (message.content) blocks.push({ type: 'text', text: message.content });
  for (const call of message.tool_calls ?? []) {
    blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: argumentsObject(call.function.arguments) });
  }
  return blocks;
}

/** `tool_use.input` is an object; arguments that parse to anything else are sent as an empty input. */
function argumentsObject(json: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(json);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

interface Conversation {
  messages: ChatMessage[];
  tools: ToolSpec[] | undefined;
  forceTool: CallRequest['forceTool'];
  enableThinking: boolean | undefined;
}

export function toCallRequest(req: AnthropicMessagesRequest): CallRequest {
  const conversation = toConversation(req);
  return {
    model: req.model,
    messages: conversation.messages,
    tools: conversation.tools,
    forceTool: conversation.forceTool,
    enableThinking: conversation.enableThinking,
    n: 1,
    wantLogprobs: false,
    sampling: { temperature: req.temperature, topP: req.top_p, topK: req.top_k, maxTokens: req.max_tokens, stopStrings: req.stop_sequences ?? [] },
    messagesField: 'messages',
  };
}

export function toConversation(req: AnthropicCountTokensRequest): Conversation {
  const messages: ChatMessage[] = [];
  if (req.system !== undefined) {
    const system = textOf(req.system);
    if (system !== '') messages.push({ role: 'system', content: system });
  }
  req.messages.forEach((message, i) => {
    if (message.role === 'system') messages.push({ role: 'system', content: textOf(message.content) });
    else if (message.role === 'user') messages.push(...userMessages(message.content, i));
    else messages.push(assistantMessage(message.content, i));
  });
  const clientTools = (req.tools ?? []).filter(isClientTool);
  const choice = req.tool_choice;
  const tools =
    clientTools.length === 0 || choice?.type === 'none'
      ? undefined
      : clientTools.map((tool): ToolSpec => {
          const fn: ToolSpec['function'] = { name: tool.name };
          if (tool.description !== undefined) fn.description = tool.description;
          if (tool.input_schema !== undefined) fn.parameters = tool.input_schema;
          return { type: 'function', function: fn };
        });
  const thinking = req.thinking?.type;
  return {
    messages,
    tools,
    forceTool: choice?.type === 'any' ? 'any' : choice?.type === 'tool' ? { name: choice.name } : undefined,
    enableThinking: thinking === undefined ? undefined : thinking !== 'disabled',
  };
}

function textOf(content: string | readonly AnthropicContentBlock[]): string {
  if (typeof content === 'string') return content;
  return content
    .flatMap((block) => (block.type === 'text' ? [block.text] : []))
    .join(TEXT_JOINER);
}

function userMessages(content: string | AnthropicContentBlock[], index: number): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const out: ChatMessage[] = [];
  const texts: string[] = [];
  content.forEach((block, b) => {
    if (block.type === 'tool_result') {
      const text = block.content === undefined ? '' : textOf(block.content);
      // The model must see that the tool failed; the templates have no field for it.
      out.push({ role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error ? `Error: ${text}` : text });
    } else if (block.type === 'text') {
      texts.push(block.text);
    } else if (block.type !== 'redacted_thinking' && block.type !== 'thinking') {
      throw new HttpError(400, 'InvalidRequestError', `messages.${index}.content.${b}: a user message cannot hold a ${block.type} block`, {
        field: `messages.${index}.content.${b}.type`,
        code: 'invalid_request',
      });
    }
  });
  if (texts.length > 0) out.push({ role: 'user', content: texts.join(TEXT_JOINER) });
  return out;
}

function assistantMessage(content: string | AnthropicContentBlock[], index: number): ChatMessage {
  if (typeof content === 'string') return { role: 'assistant', content };
  const texts: string[] = [];
  const reasoning: string[] = [];
  const message: ChatMessage = { role: 'assistant', content: null };
  content.forEach((block, b) => {
    if (block.type === 'text') texts.push(block.text);
    else if (block.type === 'thinking') reasoning.push(block.thinking);
    else if (block.type === 'tool_use') {
      (message.tool_calls ??= []).push({ id: block.id, type: 'function', function: { name: block.name, arguments: jsonTextKeepingSource(block.input) } });
    } else if (block.type === 'tool_result') {
      throw new HttpError(400, 'InvalidRequestError', `messages.${index}.content.${b}: tool_result blocks belong in user messages`, {
        field: `messages.${index}.content.${b}.type`,
        code: 'invalid_request',
      });
    }
  });
  // As the gateway returns a tool-calling turn without text: content null (chat's form, which the tracker matches).
  message.content = texts.length === 0 && message.tool_calls ? null : texts.join(TEXT_JOINER);
  if (reasoning.length > 0) message.reasoning_content = reasoning.join(TEXT_JOINER);
  return message;
}
