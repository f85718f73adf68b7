/**
 * OpenAI's Responses API for one episode's agent: `POST /v1/responses` (the OpenAI Agents SDK's default, and the
 * only API the Codex CLI speaks). The request becomes chat messages and tools and takes the one call path
 * (call.ts), so a Responses agent is rendered, recorded and merged exactly like a chat-completions one.
 *
 * The mapping to chat messages: `instructions`, then the input items in order — `system`/`developer` messages as
 * system messages, `user` messages, `assistant` messages (output_text parts) with the `function_call` items and a
 * preceding `reasoning` item that belong to the same turn folded into one assistant message, `function_call_output`
 * items as tool messages. Text parts of one message are joined without a separator, as chat completions joins them.
 *
 * `previous_response_id` names a response of this episode: its conversation is rebuilt from the episode's record
 * (that call's messages, without its `instructions`, and its answer exactly as recorded), not from a global store;
 * another episode's response is a 400, an unknown one a 404. A chained call and a stateless re-send of the same
 * output items render the same prompt.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { functionTools, responsesRequestSchema, type ResponsesInputItem, type ResponsesRequest, type ResponsesTextPart } from '../../common/responses-api.ts';
import type { ActiveEpisode } from '../episodes/episode-service.ts';
import { HttpError, badRequest, notFound } from '../http/errors.ts';
import { sendJson } from '../http/respond.ts';
import {
  acceptCall,
  type BusyClock,
  inFlight,
  prepareCall,
  runCall,
  type CallOutcome,
  type CallRequest,
  type GatewayContext,
  type PreparedCall,
} from './call.ts';
import { ResponsesSseWriter, newItemId, type ResponseObject } from './responses-stream.ts';

interface RememberedResponse {
  callId: string;
  /** Whether the call's first message was its `instructions` (left out when the conversation is continued). */
  instructions: boolean;
}

/**
 * Response id → the call it answered, kept on each episode (it goes with the episode: no peer-wide table to cap).
 * A response id names its episode (`resp_<episode>.<random>`), so another episode's id is told from an unknown one.
 */
export class ResponseIndex {
  private readonly byEpisode = new WeakMap<ActiveEpisode, Map<string, RememberedResponse>>();

  newId(episode: ActiveEpisode): string {
    return `resp_${episode.meta.id.replace(/^ep_/, '')}.${randomBytes(12).toString('base64url')}`;
  }

  remember(episode: ActiveEpisode, id: string, entry: RememberedResponse): void {
    let entries = this.byEpisode.get(episode);
    if (!entries) this.byEpisode.set(episode, (entries = new Map()));
    entries.set(id, entry);
  }

  /** The call a response of this episode answered; 'foreign' for another episode's response, undefined if unknown. */
  lookup(episode: ActiveEpisode, id: string): RememberedResponse | 'foreign' | undefined {
    const owner = /^resp_([A-Za-z0-9_-]+)\./.exec(id)?.[1];
    if (owner !== undefined && `ep_${owner}` !== episode.meta.id) return 'foreign';
    return this.byEpisode.get(episode)?.get(id);
  }
}

export function createResponsesHandler(ctx: GatewayContext, index: ResponseIndex) {
  return async function responses(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { busy, episode, body } = await acceptCall(ctx, req, responsesRequestSchema);
    const request = busy.time(() => toCallRequest(body, previousConversation(episode, body.previous_response_id, index)));
    await inFlight(ctx, episode, busy, () => answer(episode, body, request, index, req, res, busy));
  };
}

async function answer(
  episode: ActiveEpisode,
  body: ResponsesRequest,
  request: CallRequest,
  index: ResponseIndex,
  req: IncomingMessage,
  res: ServerResponse,
  busy: BusyClock,
): Promise<'answered' | 'cancelled'> {
  busy.start();
  const id = index.newId(episode);
  const created = Math.floor(Date.now() / 1000);
  const base = (status: string, output: unknown[] = []): ResponseObject => responseObject(body, id, created, status, output);
  let prepared: PreparedCall;
  try {
    prepared = prepareCall(episode, request);
  } catch (err) {
    // A harness that streams (Codex) understands a context overflow only as the stream's response.failed.
    if (!body.stream || !(err instanceof HttpError) || err.details.code !== 'context_length_exceeded') throw err;
    const sse = new ResponsesSseWriter(res);
    sse.start(base('in_progress'));
    sse.fail(base('failed'), { code: 'context_length_exceeded', message: err.message });
    busy.stop();
    return 'answered';
  }

  const sse = body.stream ? new ResponsesSseWriter(res) : undefined;
  let outcome: CallOutcome | 'cancelled';
  try {
    outcome = await runCall(prepared, {
      req,
      res,
      busy,
      hooks: sse && {
        begin: () => sse.start(base('in_progress')),
        events: (_choice, events) => {
          for (const event of events) sse.event(event);
        },
      },
    });
  } catch (err) {
    if (!sse) throw err;
    sse.fail(base('failed'), { code: 'server_error', message: err instanceof HttpError ? err.message : 'generation failed; the peer log has the details' });
    return 'answered';
  }
  if (outcome === 'cancelled') return 'cancelled';
  const [choice] = outcome.choices;
  const truncated = choice.finishReason(outcome.results[0]) === 'length';
  const status = truncated ? 'incomplete' : 'completed';
  index.remember(episode, id, { callId: outcome.records[0].callId, instructions: Boolean(body.instructions) });
  const usage = {
    input_tokens: outcome.promptTokens,
    input_tokens_details: { cached_tokens: outcome.cachedPromptTokens },
    output_tokens: outcome.completionTokens,
    output_tokens_details: { reasoning_tokens: choice.reasoningTokens },
    total_tokens: outcome.promptTokens + outcome.completionTokens,
  };
  const extras = { usage, incomplete_details: truncated ? { reason: 'max_output_tokens' } : null };
  if (sse) {
    sse.finish({ ...base(status), ...extras }, status);
  } else {
    sendJson(res, 200, { ...base(status, outputItems(outcome.messages[0], status)), ...extras });
  }
  busy.stop();
  return 'answered';
}

/** The response object's fields, as OpenAI returns them (what the request set echoed back). */
function responseObject(body: ResponsesRequest, id: string, created: number, status: string, output: unknown[]): ResponseObject {
  return {
    id,
    object: 'response',
    created_at: created,
    status,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    store: false,
    temperature: body.temperature ?? null,
    text: { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? null,
    truncation: 'disabled',
    usage: null,
    metadata: body.metadata ?? {},
  };
}

/** The assistant message as output items: reasoning, the message (if it has text or nothing else), function calls. */
export function outputItems(message: ChatMessage, status: 'completed' | 'incomplete'): Record<string, unknown>[] {
  const items: Record<string, unknown>[] = [];
  if (message.reasoning_content) {
    items.push({ type: 'reasoning', id: newItemId('rs'), summary: [], content: [{ type: 'reasoning_text', text: message.reasoning_content }] });
  }
  const calls = message.tool_calls ?? [];
  if ((message.content ?? '') !== '' || calls.length === 0) {
    items.push({
      type: 'message',
      id: newItemId('msg'),
      status,
      role: 'assistant',
      content: [{ type: 'output_text', text: message.content ?? '', annotations: [], logprobs: [] }],
    });
  }
  for (const call of calls) {
    items.push({ type: 'function_call', id: newItemId('fc'), call_id: call.id, name: call.function.name, arguments: call.function.arguments, status: 'completed' });
  }
  return items;
}

/** The conversation of `previous_response_id` (its input without instructions, then its answer), or []. */
function previousConversation(episode: ActiveEpisode, previousId: string | null | undefined, index: ResponseIndex): ChatMessage[] {
  if (!previousId) return [];
  const entry = index.lookup(episode, previousId);
  if (entry === 'foreign') {
    throw new HttpError(400, 'InvalidRequestError', `previous_response_id ${previousId} belongs to another episode; responses chain only within one`, {
      field: 'previous_response_id',
      code: 'invalid_previous_response_id',
    });
  }
  const call = entry && episode.tracker.calls.find((c) => c.callId === entry.callId);
  if (!entry || !call) throw notFound(`previous_response_id ${previousId} is not a response of this episode`, 'previous_response_not_found');
  const earlier = entry.instructions ? call.messages.slice(1) : call.messages;
  return call.assistantMessage ? [...earlier, call.assistantMessage] : earlier;
}

export function toCallRequest(body: ResponsesRequest, previous: ChatMessage[] = []): CallRequest {
  const messages: ChatMessage[] = [];
  if (body.instructions) messages.push({ role: 'system', content: body.instructions });
  messages.push(...previous, ...inputMessages(body.input));
  if (messages.length === 0) throw badRequest('input: give at least one message', 'input');
  const choice = body.tool_choice;
  const declared = functionTools(body.tools ?? []);
  const tools =
    declared.length === 0 || choice === 'none'
      ? undefined
      : declared.map((t): ToolSpec => {
          const fn: ToolSpec['function'] = { name: t.name };
          if (t.description) fn.description = t.description;
          if (t.parameters) fn.parameters = t.parameters;
          return { type: 'function', function: fn };
        });
  const effort = body.reasoning?.effort;
  return {
    model: body.model,
    messages,
    tools,
    forceTool: choice === 'required' ? 'any' : typeof choice === 'object' && choice?.type === 'function' ? { name: (choice as { name: string }).name } : undefined,
    // An effort of none (or minimal) turns the template's thinking off; any other effort turns it on.
    enableThinking: effort === undefined || effort === null ? undefined : effort !== 'none' && effort !== 'minimal',
    n: 1,
    wantLogprobs: false,
    sampling: { temperature: body.temperature, topP: body.top_p, maxTokens: body.max_output_tokens, stopStrings: [] },
    messagesField: 'input',
  };
}

function partsText(content: string | readonly ResponsesTextPart[]): string {
  if (typeof content === 'string') return content;
  return content.map((part) => (part.type === 'refusal' ? part.refusal : part.text)).join('');
}

function inputMessages(input: ResponsesRequest['input']): ChatMessage[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  const messages: ChatMessage[] = [];
  /** The assistant message the current turn's items fold into, until a user, system or tool message ends the turn. */
  let turn: ChatMessage | null = null;
  const assistantTurn = (): ChatMessage => {
    if (!turn) {
      turn = { role: 'assistant', content: null };
      messages.push(turn);
    }
    return turn;
  };
  for (const item of input.filter((i): i is ResponsesInputItem => i !== null)) {
    if (item.type === 'function_call') {
      (assistantTurn().tool_calls ??= []).push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } });
    } else if (item.type === 'function_call_output') {
      turn = null;
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: partsText(item.output) });
    } else if (item.type === 'reasoning') {
      const text = [...(item.content ?? []), ...(item.summary ?? [])].map((p) => p.text).join('');
      // A reasoning item opens a turn; the message and calls after it belong to it.
      turn = null;
      if (text !== '') assistantTurn().reasoning_content = text;
    } else if (item.role === 'assistant') {
      const current = turn as ChatMessage | null;
      const text = partsText(item.content);
      // Text after this turn's calls starts a new turn; text of a fresh turn (after reasoning) joins it.
      if (current && current.content === null && !current.tool_calls) current.content = text;
      else {
        turn = null;
        assistantTurn().content = text;
      }
    } else {
      turn = null;
      messages.push({ role: item.role === 'user' ? 'user' : 'system', content: partsText(item.content) });
    }
  }
  return messages;
}
