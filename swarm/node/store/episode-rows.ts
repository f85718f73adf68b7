/**
 * The rows of the episode tables as SQLite returns them, and their mapping to the shared types in
 * swarm/common/timeline. Token arrays are little-endian blobs (blobs.ts); structured values are JSON text.
 */
import type { CallRecord } from '../../common/timeline/call.ts';
import type { EpisodeKind, EpisodeMeta, EpisodeState } from '../../common/timeline/export.ts';
import type { MergeMode, MergeSavings, Timeline } from '../../common/timeline/merge.ts';
import { decodeFloat32, decodeInt32, decodeMask } from './blobs.ts';

export interface EpisodeRow {
  id: string;
  model: string;
  task_id: string;
  group_id: string;
  kind: EpisodeKind;
  state: EpisodeState;
  reward: number | null;
  success: number | null;
  metrics: string | null;
  abort_reason: string | null;
  created_at: string;
  ended_at: string | null;
  client: string | null;
  script_hash: string | null;
  policy_version: number;
  team_id: string | null;
  cancelled_calls: number;
  merge_mode: MergeMode | null;
  merge_savings: string | null;
}

export function episodeFromRow(row: EpisodeRow): EpisodeMeta {
  return {
    id: row.id,
    model: row.model,
    taskId: row.task_id,
    groupId: row.group_id,
    kind: row.kind,
    state: row.state,
    reward: row.reward,
    success: row.success === null ? null : row.success === 1,
    metrics: row.metrics === null ? null : (JSON.parse(row.metrics) as Record<string, unknown>),
    abortReason: row.abort_reason,
    createdAt: row.created_at,
    endedAt: row.ended_at,
    client: row.client,
    scriptHash: row.script_hash,
    policyVersion: row.policy_version,
    teamId: row.team_id,
    cancelledCalls: row.cancelled_calls,
  };
}

export function savingsFromColumn(column: string | null): MergeSavings | null {
  return column === null ? null : (JSON.parse(column) as MergeSavings);
}

export interface CallRow {
  idx: number;
  call_id: string;
  agent_key: string;
  messages: string;
  tools: string | null;
  assistant_message: string | null;
  finish_reason: string | null;
  prompt_ids: Buffer;
  generated_ids: Buffer;
  logprobs: Buffer;
  policy_version: number;
  started_at: string;
  first_token_at: string | null;
  ended_at: string;
  splice: string;
}

const CALL_META_COLUMNS =
  'idx, call_id, agent_key, assistant_message, finish_reason, policy_version, started_at, first_token_at, ended_at, splice';

/** Every column of a call. */
export const FULL_CALL_COLUMNS = `${CALL_META_COLUMNS}, messages, tools, prompt_ids, generated_ids, logprobs`;

/**
 * A call without its messages, tools and token arrays, read as empty values: those are most of a long episode's
 * bytes (each request repeats the history), and the merge view never draws them.
 */
export const LIGHT_CALL_COLUMNS = `${CALL_META_COLUMNS}, '[]' AS messages, NULL AS tools, X'' AS prompt_ids, X'' AS generated_ids, X'' AS logprobs`;

export function callFromRow(row: CallRow): CallRecord {
  return {
    callId: row.call_id,
    index: row.idx,
    agentKey: row.agent_key,
    messages: JSON.parse(row.messages),
    tools: row.tools === null ? null : JSON.parse(row.tools),
    promptIds: decodeInt32(row.prompt_ids),
    generatedIds: decodeInt32(row.generated_ids),
    logprobs: decodeFloat32(row.logprobs),
    assistantMessage: row.assistant_message === null ? null : JSON.parse(row.assistant_message),
    finishReason: row.finish_reason,
    policyVersion: row.policy_version,
    timings: { startedAt: row.started_at, firstTokenAt: row.first_token_at, endedAt: row.ended_at },
    splice: JSON.parse(row.splice),
  };
}

/** The same call as LIGHT_CALL_COLUMNS reads it, for calls already in memory. */
export function lightCall(call: CallRecord): CallRecord {
  return { ...call, messages: [], tools: null, promptIds: [], generatedIds: [], logprobs: [] };
}

export interface TimelineRow {
  timeline_id: string;
  agent_key: string | null;
  tokens: Buffer;
  loss_mask: Buffer;
  logprobs: Buffer;
  call_ids: string;
  policy_versions: string;
  spans: string;
  decisions: string;
}

export function timelineFromRow(row: TimelineRow): Timeline {
  const timeline: Timeline = {
    timelineId: row.timeline_id,
    tokens: decodeInt32(row.tokens),
    lossMask: decodeMask(row.loss_mask),
    logprobs: decodeFloat32(row.logprobs),
    callIds: JSON.parse(row.call_ids),
    policyVersions: JSON.parse(row.policy_versions),
    spans: JSON.parse(row.spans),
  };
  if (row.agent_key !== null) timeline.agentKey = row.agent_key;
  return timeline;
}
