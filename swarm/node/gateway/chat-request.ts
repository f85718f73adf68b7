/**
 * The `POST /v1/chat/completions` request as OpenAI defines it, validated at the edge. Unknown fields are ignored
 * (clients send many: `user`, `parallel_tool_calls`, penalties …); known fields with wrong types are a 400 that
 * names the field. Messages are normalized to the chat template's ChatMessage.
 */
import { z } from 'zod';
import type { ChatMessage, Tokenizer, ToolSpec } from '../../../worker/tokenizer/types.ts';
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
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

const toolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) }),
]);

/**
 * Variables for the chat template (vLLM's `chat_template_kwargs`). `enable_thinking` is Qwen3's thinking switch;
 * the template render takes only that one today, so other variables are accepted and not yet passed on.
 */
export const chatTemplateKwargsSchema = z.looseObject({ enable_thinking: z.boolean().optional() });

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

/**
 * A lower bound on the prompt's token count, from the messages alone — without rendering or tokenizing them, which
 * takes the event loop for a second on a 7 MB prompt. It must never be too high (that would refuse a prompt that
 * fits), so it counts only what certainly reaches the tokenizer and divides by the most bytes one token can hold:
 *  - only user, system and tool contents, trimmed: templates render those as given (some trim them); assistant
 *    turns are left out, since templates may drop parts of them (Qwen3 drops earlier turns' reasoning);
 *  - only their ASCII characters, which keep at least one byte each through the tokenizer's normalizer (NFC may
 *    compose a letter with the accents after it, but into a character of two bytes or more). A string of n UTF-16
 *    units and b UTF-8 bytes has at least 2n - b ASCII units, since every other unit takes at least 2 bytes (a
 *    surrogate pair 4): O(1), where counting them would read every character;
 *  - over `maxTokenBytes`, the longest text one token stands for (a byte-level token of 128 spaces is 128 bytes).
 * It assumes a normalizer that does not delete or merge ASCII characters (none, NFC/NFKC, lowercase, strip accents:
 * the models this gateway serves); a whitespace-collapsing one would need the rendered count.
 * Returns 0 when even one byte per token could not reach `threshold` (the usual prompt), so the vocabulary pass of
 * maxTokenBytes runs only once a large prompt comes.
 */
export function promptTokensAtLeast(messages: readonly ChatMessage[], tokenizer: Tokenizer, threshold: number): number {
  let asciiAtLeast = 0;
  for (const m of messages) {
    if (m.role === 'assistant' || m.content === null) continue;
    const text = m.content.trim();
    asciiAtLeast += Math.max(0, 2 * text.length - Buffer.byteLength(text));
  }
  if (asciiAtLeast < threshold) return 0;
  return Math.floor(asciiAtLeast / maxTokenBytes(tokenizer));
}

const maxTokenBytesCache = new WeakMap<Tokenizer, number>();

/**
 * An upper bound on the UTF-8 bytes of text any one token stands for. The spelling (idToToken) is never shorter than
 * the text (byte-level's `Ġ` is 2 bytes for a space, sentencepiece's `<0x0A>` 6 for a newline), so it bounds every
 * token in one pass (16-120 ms over Qwen's 151k, once). Decoding is exact but ~2.5 µs a token, so only tokens whose
 * spelling could still beat the best found are decoded: longest spelling first, until none can. Cached per tokenizer.
 */
export function maxTokenBytes(tokenizer: Tokenizer): number {
  const cached = maxTokenBytesCache.get(tokenizer);
  if (cached !== undefined) return cached;
  const spelled: { id: number; bytes: number }[] = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    try {
      spelled.push({ id, bytes: Buffer.byteLength(tokenizer.idToToken(id)) });
    } catch {
      // Vocabularies may have unused ids.
    }
  }
  spelled.sort((a, b) => b.bytes - a.bytes);
  const probe = tokenizer.encode('a');
  let best = 1;
  for (const { id, bytes } of spelled) {
    if (bytes <= best) break;
    best = Math.max(best, probe.length === 1 ? Math.min(bytes, decodedBytes(tokenizer, probe[0], id)) : bytes);
  }
  maxTokenBytesCache.set(tokenizer, best);
  return best;
}

/**
 * The bytes `id` adds after an ordinary token: decoders may treat a first token differently (sentencepiece strips its
 * leading space), which would undercount. A token that is part of a character decodes to U+FFFD, 3 bytes: an
 * overcount, the safe side.
 */
function decodedBytes(tokenizer: Tokenizer, probe: number, id: number): number {
  return Buffer.byteLength(tokenizer.decode([probe, id])) - Buffer.byteLength(tokenizer.decode([probe]));
}
