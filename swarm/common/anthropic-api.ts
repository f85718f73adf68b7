/**
 * Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) as the gateway accepts it, validated
 * at the edge. Objects are loose: clients send fields that do not apply to a local model (`cache_control`,
 * `citations`, `metadata`, `context_management`, `output_config`, `service_tier`, `defer_loading` …), and those
 * are accepted and ignored; known fields with wrong types are a 400 naming the field. Pure: shared by the gateway and
 * anything that builds such requests.
 */
import { z } from 'zod';
import { parsedJsonObject } from './json-schema-object.ts';

/** Tool names as Anthropic allows them (and as chat templates can write them back). */
const toolName = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'tool names are 1–128 letters, digits, _ or -');

export const anthropicTextBlockSchema = z.looseObject({ type: z.literal('text'), text: z.string() });

const toolResultContentSchema = z.union([
  z.string(),
  // Only text reaches a text model; an image in a tool result is refused with its field named.
  z.array(anthropicTextBlockSchema),
]);

const contentBlockSchema = z.discriminatedUnion('type', [
  anthropicTextBlockSchema,
  z.looseObject({ type: z.literal('tool_use'), id: z.string().min(1), name: toolName, input: parsedJsonObject }),
  z.looseObject({
    type: z.literal('tool_result'),
    tool_use_id: z.string().min(1),
    content: toolResultContentSchema.optional(),
    is_error: z.boolean().optional(),
  }),
  z.looseObject({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().optional() }),
  // Encrypted reasoning of Anthropic's own models: nothing a local template can render.
  z.looseObject({ type: z.literal('redacted_thinking'), data: z.string() }),
]);
export type AnthropicContentBlock = z.infer<typeof contentBlockSchema>;

const contentSchema = z.union([z.string(), z.array(contentBlockSchema)]);

export const anthropicMessageSchema = z.looseObject({
  // `system` in the middle of a conversation: Claude Code sends it (reminders between turns).
  role: z.enum(['user', 'assistant', 'system']),
  content: contentSchema,
});
export type AnthropicMessage = z.infer<typeof anthropicMessageSchema>;

/**
 * A client tool: `type` absent or 'custom'. Anthropic's server tools (`web_search_20250305`, `bash_20250124` …)
 * carry other types and no `input_schema`; a local model cannot run them, so they are dropped, not refused.
 */
const toolSchema = z.looseObject({
  type: z.string().optional(),
  name: z.string().min(1),
  description: z.string().optional(),
  input_schema: parsedJsonObject.optional(),
});
export type AnthropicTool = z.infer<typeof toolSchema>;

const toolChoiceSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('tool'), name: z.string().min(1), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('none') }),
]);

/** `enabled` (with a budget), `adaptive` (the model decides: Claude Code) or `disabled`: the template's thinking switch. */
const thinkingSchema = z.looseObject({ type: z.enum(['enabled', 'disabled', 'adaptive']), budget_tokens: z.number().int().optional() });

const systemSchema = z.union([z.string(), z.array(anthropicTextBlockSchema)]);

const conversationFields = {
  model: z.string().min(1),
  messages: z.array(anthropicMessageSchema).min(1),
  system: systemSchema.optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: toolChoiceSchema.optional(),
  thinking: thinkingSchema.optional(),
};

function checkToolChoice(req: { tools?: AnthropicTool[]; tool_choice?: z.infer<typeof toolChoiceSchema> }, ctx: z.RefinementCtx) {
  const names = (req.tools ?? []).filter(isClientTool).map((t) => t.name);
  const choice = req.tool_choice;
  if ((choice?.type === 'any' || choice?.type === 'tool') && names.length === 0) {
    ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: 'tool_choice asks for a tool call but no tools were given' });
  }
  if (choice?.type === 'tool' && !names.includes(choice.name)) {
    ctx.addIssue({ code: 'custom', path: ['tool_choice', 'name'], message: `tool_choice names "${choice.name}", which is not in tools` });
  }
  (req.tools ?? []).forEach((tool, i) => {
    if (isClientTool(tool) && !toolName.safeParse(tool.name).success) {
      ctx.addIssue({ code: 'custom', path: ['tools', i, 'name'], message: 'tool names are 1–128 letters, digits, _ or -' });
    }
  });
}

/** A tool the agent runs itself (the only kind a local model can call). */
export function isClientTool(tool: AnthropicTool): boolean {
  return tool.type === undefined || tool.type === 'custom';
}

export const anthropicMessagesRequestSchema = z
  .looseObject({
    ...conversationFields,
    // Required, as Anthropic requires it; more than the context has room for is capped to the room left.
    max_tokens: z.number().int().positive(),
    stop_sequences: z.array(z.string().min(1)).optional(),
    temperature: z.number().min(0).max(1).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    stream: z.boolean().optional(),
  })
  .superRefine(checkToolChoice);
export type AnthropicMessagesRequest = z.infer<typeof anthropicMessagesRequestSchema>;

export const anthropicCountTokensRequestSchema = z.looseObject(conversationFields).superRefine(checkToolChoice);
export type AnthropicCountTokensRequest = z.infer<typeof anthropicCountTokensRequestSchema>;

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use';

/** Anthropic's error types by HTTP status (https://docs.anthropic.com/en/api/errors). */
export function anthropicErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  // A model that is loading or updating: Anthropic's "temporarily overloaded", which its clients retry.
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}
