/**
 * OpenAI's Responses API (`POST /v1/responses`) as the gateway accepts it, validated at the edge. Objects are loose:
 * the SDKs and harnesses send fields that do not apply to a local model (`store`, `include`, `prompt_cache_key`,
 * `client_metadata`, `service_tier`, item ids and statuses, `annotations` …), and those are accepted and ignored;
 * known fields with wrong types are a 400 naming the field. Input items of other types than the ones below (a hosted
 * tool's call, an item reference) are dropped, as are hosted tools (`{type: "web_search"}`): a local model can use
 * neither. Pure: shared by the gateway and anything that builds such requests.
 */
import { z } from 'zod';
import { parsedJsonObject } from './json-schema-object.ts';

const toolName = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'tool names are 1–128 letters, digits, _ . : or -');

/** Text parts only: this gateway serves text models. Image, audio or file parts are refused with the field named. */
const textPartSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('input_text'), text: z.string() }),
  z.looseObject({ type: z.literal('output_text'), text: z.string() }),
  z.looseObject({ type: z.literal('refusal'), refusal: z.string() }),
]);
export type ResponsesTextPart = z.infer<typeof textPartSchema>;

const messageItemSchema = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(textPartSchema)]),
});

const functionCallItemSchema = z.looseObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: toolName,
  arguments: z.string(),
});

const functionCallOutputItemSchema = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(textPartSchema)]),
});

const reasoningItemSchema = z.looseObject({
  type: z.literal('reasoning'),
  summary: z.array(z.looseObject({ text: z.string() })).optional(),
  content: z.array(z.looseObject({ text: z.string() })).nullish(),
});

const KNOWN_ITEM_TYPES = ['message', 'function_call', 'function_call_output', 'reasoning'];

/** An item of a type this gateway does not model: accepted and dropped. */
const otherItemSchema = z.looseObject({ type: z.string().refine((t) => !KNOWN_ITEM_TYPES.includes(t)) }).transform(() => null);

const inputItemSchema = z.union([
  functionCallItemSchema,
  functionCallOutputItemSchema,
  reasoningItemSchema,
  messageItemSchema,
  otherItemSchema,
]);
export type ResponsesInputItem = Exclude<z.infer<typeof inputItemSchema>, null>;

const functionToolSchema = z.looseObject({
  type: z.literal('function'),
  name: toolName,
  description: z.string().nullish(),
  parameters: parsedJsonObject.nullish(),
  strict: z.boolean().nullish(),
});
export type ResponsesFunctionTool = z.infer<typeof functionToolSchema>;

/** Codex groups tools as `{type: "namespace", name, tools: […]}`: its function tools are unpacked. */
const namespaceToolSchema = z.looseObject({ type: z.literal('namespace'), name: z.string().optional(), tools: z.array(z.unknown()) });

const toolSchema = z.union([functionToolSchema, namespaceToolSchema, z.looseObject({ type: z.string() })]);

const toolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), name: z.string().min(1) }),
  // A hosted tool's choice (`{type: "web_search"}`): nothing to force here, so it is `auto`.
  z.looseObject({ type: z.string() }),
]);

export const responsesRequestSchema = z
  .looseObject({
    model: z.string().min(1),
    input: z.union([z.string(), z.array(inputItemSchema)]),
    instructions: z.string().nullish(),
    tools: z.array(toolSchema).nullish(),
    tool_choice: toolChoiceSchema.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    // No minimum: OpenAI's 16 is its own rule, a local model can stop after one token.
    max_output_tokens: z.number().int().positive().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    text: z.looseObject({ format: z.looseObject({ type: z.enum(['text', 'json_object', 'json_schema']) }).nullish() }).nullish(),
    reasoning: z.looseObject({ effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullish(), summary: z.string().nullish() }).nullish(),
    metadata: z.record(z.string(), z.string()).nullish(),
    stream: z.boolean().nullish(),
    previous_response_id: z.string().min(1).nullish(),
  })
  .superRefine((req, ctx) => {
    const names = functionTools(req.tools ?? []).map((t) => t.name);
    const choice = req.tool_choice;
    const forced = choice === 'required' || (typeof choice === 'object' && choice !== null && choice.type === 'function');
    if (forced && names.length === 0) ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: 'tool_choice asks for a tool call but no function tools were given' });
    if (typeof choice === 'object' && choice !== null && choice.type === 'function' && !names.includes((choice as { name: string }).name)) {
      ctx.addIssue({ code: 'custom', path: ['tool_choice', 'name'], message: 'tool_choice names a function that is not in tools' });
    }
  });
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

/** The function tools of a request, namespaces unpacked, hosted tools left out. */
export function functionTools(tools: readonly unknown[]): ResponsesFunctionTool[] {
  return tools.flatMap((tool): ResponsesFunctionTool[] => {
    const fn = functionToolSchema.safeParse(tool);
    if (fn.success) return [fn.data];
    const ns = namespaceToolSchema.safeParse(tool);
    return ns.success ? functionTools(ns.data.tools) : [];
  });
}
