/**
 * What the context tracker records for one LLM call of an episode, as stored and exported.
 * Pure types and zod schemas, shared by the tracker, the store, the export and the merge view.
 */
import { z } from 'zod';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import type { MergeCall } from './merge.ts';

export const toolCallSchema = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const chatMessageSchema = z.object({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string().nullable(),
  tool_calls: z.array(toolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
  reasoning_content: z.string().optional(),
}) satisfies z.ZodType<ChatMessage>;

export const toolSpecSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string(),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
}) satisfies z.ZodType<ToolSpec>;

/**
 * How an earlier assistant turn of the request was tokenized.
 * - spliced: the turn matched a generated call's message and its rendered text equals the generated text, so the
 *   generated ids were used verbatim.
 * - spliced-by-text: no call's message matched the turn exactly, but a call's generated text appears where the turn
 *   was rendered (the text-level fallback), so its ids were used.
 * - template-rewrote-turn: the turn matched a call, but the template rendered it differently from what was
 *   generated (e.g. it dropped the reasoning): its tokens are the template's, and the prefix will break there.
 * - empty-generation: the matching call generated no tokens.
 * - no-generated-call: no call of this episode produced this turn (written by the client, or another episode's).
 */
export const spliceOutcomeSchema = z.enum([
  'spliced',
  'spliced-by-text',
  'template-rewrote-turn',
  'empty-generation',
  'no-generated-call',
]);
export type SpliceOutcome = z.infer<typeof spliceOutcomeSchema>;

export const turnSpliceSchema = z.object({
  /** Index of the assistant message in the request's messages. */
  messageIndex: z.number().int(),
  /** The call whose generation this turn is (null when none matched). */
  callId: z.string().nullable(),
  outcome: spliceOutcomeSchema,
  detail: z.string(),
  /** True when re-tokenizing the turn's text would have given other ids than the spliced ones. */
  driftPrevented: z.boolean(),
  /**
   * True when the rendered turn differed from the generation only in tool-call formatting (arguments re-serialized,
   * whitespace around tool-call tags), and the generation's own ids replaced it.
   */
  normalized: z.boolean(),
  /** Ids spliced in (0 when not spliced). */
  tokens: z.number().int(),
});
export type TurnSplice = z.infer<typeof turnSpliceSchema>;

export const spliceReportSchema = z.object({
  assistantTurns: z.number().int(),
  splicedTurns: z.number().int(),
  driftPreventedTurns: z.number().int(),
  turns: z.array(turnSpliceSchema),
});
export type SpliceReport = z.infer<typeof spliceReportSchema>;

export const callTimingsSchema = z.object({
  /** ISO times. */
  startedAt: z.string(),
  firstTokenAt: z.string().nullable(),
  endedAt: z.string(),
});
export type CallTimings = z.infer<typeof callTimingsSchema>;

export const callRecordSchema = z.object({
  callId: z.string(),
  /** Order of completion within the episode, from 0. */
  index: z.number().int().nonnegative(),
  /** Which agent of the episode made the call: a hash of its system prompt and tool names. */
  agentKey: z.string(),
  messages: z.array(chatMessageSchema),
  tools: z.array(toolSpecSchema).nullable(),
  /** The prompt exactly as the server tokenized it (with splices). */
  promptIds: z.array(z.number().int()),
  generatedIds: z.array(z.number().int()),
  /** Logprob of each generated token under the sampling policy. */
  logprobs: z.array(z.number()),
  /** The assistant message the generation became (content, tool calls), as returned to the client. */
  assistantMessage: chatMessageSchema.nullable(),
  finishReason: z.string().nullable(),
  policyVersion: z.number().int(),
  timings: callTimingsSchema,
  splice: spliceReportSchema,
});
export type CallRecord = z.infer<typeof callRecordSchema>;

/** The merger's view of recorded calls. */
export function toMergeCalls(calls: readonly CallRecord[]): MergeCall[] {
  return calls.map((call) => ({
    callId: call.callId,
    promptIds: call.promptIds,
    generatedIds: call.generatedIds,
    generatedLogprobs: call.logprobs,
    policyVersion: call.policyVersion,
    agentKey: call.agentKey,
  }));
}
