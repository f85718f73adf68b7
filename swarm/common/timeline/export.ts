/**
 * The episode export: one JSON document with everything the timeline merge view and `agentjet episodes export`
 * show — the episode, its calls token by token, the timelines they merged into, why, and what it saved.
 */
import { z } from 'zod';
import { callRecordSchema, type CallRecord } from './call.ts';
import { MERGE_REASONS, type MergeReason, type MergeResult } from './merge.ts';

export const EPISODE_EXPORT_FORMAT = 'agentjet.episode/1';

/** active: calls may come; ended: reward reported; aborted: never trained on; trained: used by an update; discarded: ended but not used (e.g. uninformative group). */
export const episodeStateSchema = z.enum(['active', 'ended', 'aborted', 'trained', 'discarded']);
export type EpisodeState = z.infer<typeof episodeStateSchema>;

export const episodeKindSchema = z.enum(['train', 'eval']);
export type EpisodeKind = z.infer<typeof episodeKindSchema>;

export const episodeMetaSchema = z.object({
  id: z.string(),
  model: z.string(),
  taskId: z.string(),
  /** The GRPO group: the repeats of one task. */
  groupId: z.string(),
  kind: episodeKindSchema,
  state: episodeStateSchema,
  reward: z.number().nullable(),
  success: z.boolean().nullable(),
  metrics: z.record(z.string(), z.unknown()).nullable(),
  abortReason: z.string().nullable(),
  /** ISO times. */
  createdAt: z.string(),
  endedAt: z.string().nullable(),
  /** Which client ran it (peer id or runner name), when known. */
  client: z.string().nullable(),
  /** Hash of the agent script that ran it, when known. */
  scriptHash: z.string().nullable(),
  /** Policy version when the episode began. */
  policyVersion: z.number().int(),
  /** The team run it belongs to (several roles on one task), when it was one. */
  teamId: z.string().nullable().optional(),
  /** Calls whose client hung up before the answer was complete; they are in no timeline. */
  cancelledCalls: z.number().int().optional(),
});
export type EpisodeMeta = z.infer<typeof episodeMetaSchema>;

const tokenIdsSchema = z.array(z.number().int());

export const exportCallSchema = callRecordSchema.extend({
  promptTokenTexts: z.array(z.string()),
  generatedTokenTexts: z.array(z.string()),
});
export type ExportCall = z.infer<typeof exportCallSchema>;

export const callSpanSchema = z.object({
  callId: z.string(),
  promptStart: z.number().int(),
  generatedStart: z.number().int(),
  end: z.number().int(),
});

export const exportTimelineSchema = z.object({
  timelineId: z.string(),
  agentKey: z.string().nullable(),
  tokens: tokenIdsSchema,
  tokenTexts: z.array(z.string()),
  lossMask: z.array(z.union([z.literal(0), z.literal(1)])),
  logprobs: z.array(z.number()),
  callIds: z.array(z.string()),
  policyVersions: z.array(z.number().int()),
  spans: z.array(callSpanSchema),
});
export type ExportTimeline = z.infer<typeof exportTimelineSchema>;

export const mergeDecisionSchema = z.object({
  callId: z.string(),
  action: z.enum(['joined', 'started']),
  timelineId: z.string(),
  reason: z.enum(MERGE_REASONS as [MergeReason, ...MergeReason[]]),
  detail: z.string(),
  sharedPrefixTokens: z.number().int(),
  newPromptTokens: z.number().int(),
  comparedTimelineId: z.string().nullable(),
  divergedAt: z.number().int().nullable(),
});

export const mergeSavingsSchema = z.object({
  calls: z.number().int(),
  timelines: z.number().int(),
  naiveTokens: z.number().int(),
  mergedTokens: z.number().int(),
  savedTokens: z.number().int(),
  tokenRatio: z.number(),
  generatedTokens: z.number().int(),
  joinedCalls: z.number().int(),
  eligibleCalls: z.number().int(),
  mergeRate: z.number().nullable(),
});

export const episodeExportSchema = z.object({
  format: z.literal(EPISODE_EXPORT_FORMAT),
  mode: z.enum(['merged', 'naive']),
  episode: episodeMetaSchema,
  calls: z.array(exportCallSchema),
  timelines: z.array(exportTimelineSchema),
  decisions: z.array(mergeDecisionSchema),
  savings: mergeSavingsSchema,
});
export type EpisodeExport = z.infer<typeof episodeExportSchema>;

export interface EpisodeExportInput {
  episode: EpisodeMeta;
  /** In call order. */
  calls: readonly CallRecord[];
  merge: MergeResult;
  /** The vocabulary's spelling of a token (Tokenizer.idToToken). */
  tokenText: (id: number) => string;
}

export function buildEpisodeExport({ episode, calls, merge, tokenText }: EpisodeExportInput): EpisodeExport {
  const texts = (ids: readonly number[]) => ids.map((id) => tokenText(id));
  return {
    format: EPISODE_EXPORT_FORMAT,
    mode: merge.mode,
    episode,
    calls: calls.map((call) => ({
      ...call,
      promptTokenTexts: texts(call.promptIds),
      generatedTokenTexts: texts(call.generatedIds),
    })),
    timelines: merge.timelines.map((t) => ({
      timelineId: t.timelineId,
      agentKey: t.agentKey ?? null,
      tokens: t.tokens,
      tokenTexts: texts(t.tokens),
      lossMask: t.lossMask.map((m) => (m === 1 ? 1 : 0)),
      logprobs: t.logprobs,
      callIds: t.callIds,
      policyVersions: t.policyVersions,
      spans: t.spans,
    })),
    decisions: merge.decisions,
    savings: merge.savings,
  };
}
