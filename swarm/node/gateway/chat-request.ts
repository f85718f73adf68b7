/**
 * The `POST /v1/chat/completions` request as OpenAI defines it, validated at the edge. Unknown fields are ignored
 * (clients send many: `user`, `parallel_tool_calls`, penalties …); known fields with wrong types are a 400 that
 * names the field. Messages are normalized to the chat template's ChatMessage.
 */
import { z } from 'zod';
import { parsedJsonObject } from '../../common/json-schema-object.ts';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import type { CallRequest } from './call.ts';
import type { ClientSampling } from './sampling.ts';

/** OpenAI caps `n` at 128; continuous batching makes more than a few per call pointless on one machine. */
export const MAX_N = 16;
export const MAX_STOP_SEQUENCES = 4;
export const MAX_TOP_LOGPROBS = 20;

/** Text parts only: this gateway serves text models. Image or audio parts are refused with the field named. */
const textPartSchema = z.object({ type: z.literal('text'), text: z.string() });
const contentSchema = z.union([z.string(), z.array(textPartSchema)]);

const toolCallSchema = z.object({
  id: z.string(),
  type: z.literal('function').default('function'),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const messageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: contentSchema, name: z.string().optional() }),
  // `developer` is the newer name of `system` (OpenAI's reasoning models); templates only know `system`.
  z.object({ role: z.literal('developer'), content: contentSchema, name: z.string().optional() }),
  z.object({ role: z.literal('user'), content: contentSchema, name: z.string().optional() }),
  z.object({
    role: z.literal('assistant'),
    content: contentSchema.nullish(),
    tool_calls: z.array(toolCallSchema).optional(),
    reasoning_content: z.string().nullish(),
    name: z.string().optional(),
  }),
  z.object({ role: z.literal('tool'), content: contentSchema, tool_call_id: z.string().min(1) }),
]);

const toolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'tool names are 1–64 letters, digits, _ or -'),
    description: z.string().optional(),
    parameters: parsedJsonObject.optional(),
    strict: z.boolean().nullish(),
  }),
});

const toolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) }),
]);

/** Enough variables for any template switch; more is not a template's configuration. */
export const MAX_TEMPLATE_KWARGS = 32;
/** The kwargs as JSON text: switches and short strings, not documents (those belong in messages). */
export const MAX_TEMPLATE_KWARGS_BYTES = 16 * 1024;
/** A Jinja variable name (Python identifier, ASCII), at most 64 characters. */
const TEMPLATE_VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/**
 * Variables the render sets itself (HF's `apply_chat_template` and the Jinja globals): a kwarg of that name would
 * replace the conversation or the template's own switches, so it is refused rather than silently overridden.
 */
export const RESERVED_TEMPLATE_VARIABLES: ReadonlySet<string> = new Set([
  'messages', 'tools', 'documents', 'add_generation_prompt', 'continue_final_message',
  'bos_token', 'eos_token', 'pad_token', 'unk_token',
  'raise_exception', 'range', 'strftime_now', 'namespace', 'true', 'false', 'none', 'True', 'False', 'None',
]);

/**
 * Variables for the chat template (vLLM's `chat_template_kwargs`), all passed to it. `enable_thinking` is Qwen3's
 * thinking switch, the one typed: it takes the path the Responses and Messages APIs' thinking settings take.
 */
export const chatTemplateKwargsSchema = z
  .looseObject({ enable_thinking: z.boolean().optional() })
  .superRefine((kwargs, ctx) => {
    const names = Object.keys(kwargs);
    if (names.length > MAX_TEMPLATE_KWARGS) ctx.addIssue({ code: 'custom', message: `at most ${MAX_TEMPLATE_KWARGS} variables` });
    for (const name of names) {
      if (!TEMPLATE_VARIABLE_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'variable names are identifiers of at most 64 letters, digits or _' });
      else if (RESERVED_TEMPLATE_VARIABLES.has(name)) ctx.addIssue({ code: 'custom', path: [name], message: `"${name}" is set by the gateway and cannot be a template variable` });
    }
    if (Buffer.byteLength(JSON.stringify(kwargs)) > MAX_TEMPLATE_KWARGS_BYTES) {
      ctx.addIssue({ code: 'custom', message: `at most ${MAX_TEMPLATE_KWARGS_BYTES} bytes of JSON` });
    }
  });

/** The template variables besides `enable_thinking` (which travels as CallRequest.enableThinking). */
export function templateKwargs(kwargs: z.infer<typeof chatTemplateKwargsSchema> | null | undefined): Record<string, unknown> | undefined {
  if (!kwargs) return undefined;
  const rest: Record<string, unknown> = { ...kwargs };
  delete rest.enable_thinking;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

export const chatCompletionRequestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(messageSchema).min(1),
    tools: z.array(toolSchema).optional(),
    tool_choice: toolChoiceSchema.optional(),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
    n: z.number().int().min(1).max(MAX_N).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    max_tokens: z.number().int().positive().nullish(),
    max_completion_tokens: z.number().int().positive().nullish(),
    stop: z.union([z.string().min(1), z.array(z.string().min(1)).max(MAX_STOP_SEQUENCES)]).nullish(),
    seed: z.number().int().nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
    // vLLM's and SGLang's extensions: variables for the chat template, and token ids in the answer.
    chat_template_kwargs: chatTemplateKwargsSchema.nullish(),
    return_token_ids: z.boolean().nullish(),
  })
  .superRefine((req, ctx) => {
    if (req.top_logprobs && !req.logprobs) {
      ctx.addIssue({ code: 'custom', path: ['top_logprobs'], message: 'top_logprobs needs logprobs: true' });
    }
    const choice = req.tool_choice;
    const toolNames = (req.tools ?? []).map((t) => t.function.name);
    if ((choice === 'required' || typeof choice === 'object') && toolNames.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: 'tool_choice asks for a tool call but no tools were given' });
    }
    if (typeof choice === 'object' && !toolNames.includes(choice.function.name)) {
      ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: `tool_choice names "${choice.function.name}", which is not in tools` });
    }
  });

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
type RequestMessage = ChatCompletionRequest['messages'][number];

function contentText(content: z.infer<typeof contentSchema> | null | undefined): string | null {
  if (content === null || content === undefined) return null;
  return typeof content === 'string' ? content : content.map((part) => part.text).join('');
}

export function toChatMessages(messages: RequestMessage[]): ChatMessage[] {
  return messages.map((m): ChatMessage => {
    switch (m.role) {
      case 'system':
      case 'developer':
        return { role: 'system', content: contentText(m.content) };
      case 'user':
        return { role: 'user', content: contentText(m.content) };
      case 'tool':
        return { role: 'tool', content: contentText(m.content), tool_call_id: m.tool_call_id };
      case 'assistant': {
        const message: ChatMessage = { role: 'assistant', content: contentText(m.content) };
        if (m.tool_calls?.length) message.tool_calls = m.tool_calls;
        if (m.reasoning_content) message.reasoning_content = m.reasoning_content;
        return message;
      }
    }
  });
}

export function toToolSpecs(req: ChatCompletionRequest): ToolSpec[] | undefined {
  if (!req.tools?.length || req.tool_choice === 'none') return undefined;
  return req.tools.map((t) => {
    const fn: ToolSpec['function'] = { name: t.function.name };
    if (t.function.description !== undefined) fn.description = t.function.description;
    if (t.function.parameters !== undefined) fn.parameters = t.function.parameters;
    return { type: 'function', function: fn };
  });
}

export function stopStrings(req: ChatCompletionRequest): string[] {
  if (!req.stop) return [];
  return typeof req.stop === 'string' ? [req.stop] : req.stop;
}

/** The request in the form every gateway API shares (call.ts). */
export function toCallRequest(req: ChatCompletionRequest): CallRequest {
  const choice = req.tool_choice;
  return {
    model: req.model,
    messages: toChatMessages(req.messages),
    tools: toToolSpecs(req),
    forceTool: choice === 'required' ? 'any' : typeof choice === 'object' ? { name: choice.function.name } : undefined,
    enableThinking: req.chat_template_kwargs?.enable_thinking,
    templateKwargs: templateKwargs(req.chat_template_kwargs),
    n: req.n ?? 1,
    wantLogprobs: req.logprobs === true,
    sampling: chatSampling(req),
    messagesField: 'messages',
  };
}

export function chatSampling(req: ChatCompletionRequest): ClientSampling {
  return {
    temperature: req.temperature,
    topP: req.top_p,
    maxTokens: req.max_completion_tokens ?? req.max_tokens,
    seed: req.seed,
    topLogprobs: req.logprobs ? (req.top_logprobs ?? 0) : 0,
    stopStrings: stopStrings(req),
  };
}
