/**
 * The episode repository's write side: episodes, their calls token by token, and the timelines they merged into.
 * Writes that belong together (an acknowledged `end`) run in one transaction. Reads are in episode-reads.ts (one
 * episode, its calls, its export) and episode-list.ts (pages, search, run savings).
 */
import type { Database } from 'better-sqlite3';
import type { CallRecord } from '../../common/timeline/call.ts';
import type { EpisodeKind, EpisodeMeta, EpisodeState } from '../../common/timeline/export.ts';
import type { MergeResult } from '../../common/timeline/merge.ts';
import { encodeFloat32, encodeInt32, encodeMask } from './blobs.ts';
import { EpisodeExistsError, EpisodeNotFoundError, EpisodeStateError } from './episode-errors.ts';
import { getEpisode } from './episode-reads.ts';
import { statement } from './statements.ts';


export interface NewEpisode {
  id: string;
  model: string;
  taskId: string;
  /** Defaults to the task id: the repeats of one task form one GRPO group. */
  groupId?: string;
  kind: EpisodeKind;
  policyVersion: number;
  client?: string | null;
  scriptHash?: string | null;
  teamId?: string | null;
  /** ISO time; defaults to now. */
  createdAt?: string;
}

export function insertEpisode(db: Database, episode: NewEpisode): EpisodeMeta {
  const meta: EpisodeMeta = {
    id: episode.id,
    model: episode.model,
    taskId: episode.taskId,
    groupId: episode.groupId ?? episode.taskId,
    kind: episode.kind,
    state: 'active',
    reward: null,
    success: null,
    metrics: null,
    abortReason: null,
    createdAt: episode.createdAt ?? new Date().toISOString(),
    endedAt: null,
    client: episode.client ?? null,
    scriptHash: episode.scriptHash ?? null,
    policyVersion: episode.policyVersion,
    teamId: episode.teamId ?? null,
    cancelledCalls: 0,
  };
  const result = statement(
    db,
    `INSERT INTO episodes (id, model, task_id, group_id, kind, state, created_at, client, script_hash, policy_version, team_id)
     VALUES (@id, @model, @taskId, @groupId, @kind, @state, @createdAt, @client, @scriptHash, @policyVersion, @teamId)
     ON CONFLICT (id) DO NOTHING`,
  ).run(meta);
  if (result.changes === 0) throw new EpisodeExistsError(episode.id);
  return meta;
}

export interface EpisodeStateChange {
  state: EpisodeState;
  reward?: number | null;
  success?: boolean | null;
  metrics?: Record<string, unknown> | null;
  abortReason?: string | null;
  endedAt?: string | null;
}

/** Sets the state and whichever of the other fields are given. */
export function updateEpisodeState(db: Database, episodeId: string, change: EpisodeStateChange): EpisodeMeta {
  // Only the fields the change names are written.
  const columns: [string, unknown][] = [['state', change.state]];
  if (change.reward !== undefined) columns.push(['reward', change.reward]);
  if (change.success !== undefined)
    columns.push(['success', change.success === null ? null : Number(change.success)]);
  if (change.metrics !== undefined)
    columns.push(['metrics', change.metrics === null ? null : JSON.stringify(change.metrics)]);
  if (change.abortReason !== undefined) columns.push(['abort_reason', change.abortReason]);
  if (change.endedAt !== undefined) columns.push(['ended_at', change.endedAt]);
  const sets = columns.map(([column]) => `${column} = ?`).join(', ');
  // One statement per combination of fields: few, so the cache stays small.
  const result = statement(db, `UPDATE episodes SET ${sets} WHERE id = ?`).run(
    ...columns.map(([, value]) => value),
    episodeId,
  );
  if (result.changes === 0) throw new EpisodeNotFoundError(episodeId);
  return getEpisode(db, episodeId)!;
}

/** Stores one completed call. Storing the same call again (same episode and index) changes nothing. */
export function insertCall(db: Database, episodeId: string, call: CallRecord): void {
  statement(
    db,
    `INSERT INTO calls (episode_id, idx, call_id, agent_key, messages, tools, assistant_message, finish_reason, prompt_ids,
       generated_ids, logprobs, policy_version, started_at, first_token_at, ended_at, splice)
     VALUES (@episodeId, @idx, @callId, @agentKey, @messages, @tools, @assistantMessage, @finishReason, @promptIds,
       @generatedIds, @logprobs, @policyVersion, @startedAt, @firstTokenAt, @endedAt, @splice)
     ON CONFLICT (episode_id, idx) DO NOTHING`,
  ).run({
    episodeId,
    idx: call.index,
    callId: call.callId,
    agentKey: call.agentKey,
    messages: JSON.stringify(call.messages),
    tools: call.tools === null ? null : JSON.stringify(call.tools),
    assistantMessage: call.assistantMessage === null ? null : JSON.stringify(call.assistantMessage),
    finishReason: call.finishReason,
    promptIds: encodeInt32(call.promptIds),
    generatedIds: encodeInt32(call.generatedIds),
    logprobs: encodeFloat32(call.logprobs),
    policyVersion: call.policyVersion,
    startedAt: call.timings.startedAt,
    firstTokenAt: call.timings.firstTokenAt,
    endedAt: call.timings.endedAt,
    splice: JSON.stringify(call.splice),
  });
}

/** One more call of an active episode whose client hung up before the answer was complete. */
export function countCancelledCall(db: Database, episodeId: string): void {
  statement(
    db,
    `UPDATE episodes SET cancelled_calls = cancelled_calls + 1 WHERE id = ? AND state = 'active'`,
  ).run(episodeId);
}

/** Replaces the episode's timelines (and its merge mode and savings) with `merge`. */
export function saveTimelines(db: Database, episodeId: string, merge: MergeResult): void {
  db.transaction(() => {
    const updated = statement(db, 'UPDATE episodes SET merge_mode = ?, merge_savings = ? WHERE id = ?').run(
      merge.mode,
      JSON.stringify(merge.savings),
      episodeId,
    );
    if (updated.changes === 0) throw new EpisodeNotFoundError(episodeId);
    statement(db, 'DELETE FROM timelines WHERE episode_id = ?').run(episodeId);
    const insert = statement(
      db,
      `INSERT INTO timelines (episode_id, idx, timeline_id, agent_key, tokens, loss_mask, logprobs, call_ids, policy_versions, spans, decisions)
       VALUES (@episodeId, @idx, @timelineId, @agentKey, @tokens, @lossMask, @logprobs, @callIds, @policyVersions, @spans, @decisions)`,
    );
    merge.timelines.forEach((timeline, idx) => {
      insert.run({
        episodeId,
        idx,
        timelineId: timeline.timelineId,
        agentKey: timeline.agentKey ?? null,
        tokens: encodeInt32(timeline.tokens),
        lossMask: encodeMask(timeline.lossMask),
        logprobs: encodeFloat32(timeline.logprobs),
        callIds: JSON.stringify(timeline.callIds),
        policyVersions: JSON.stringify(timeline.policyVersions),
        spans: JSON.stringify(timeline.spans),
        decisions: JSON.stringify(merge.decisions.filter((d) => d.timelineId === timeline.timelineId)),
      });
    });
  })();
}

export interface EpisodeEnd {
  reward: number;
  success?: boolean | null;
  metrics?: Record<string, unknown> | null;
  /** ISO time; defaults to now. */
  endedAt?: string;
  /** The episode's calls; those not stored yet are stored now. */
  calls: readonly CallRecord[];
  merge: MergeResult;
}

/** Inside a change's transaction: the episode exists and is active, or the change is refused. */
function requireActive(db: Database, episodeId: string, change: string): void {
  const episode = getEpisode(db, episodeId);
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  if (episode.state !== 'active')
    throw new EpisodeStateError(
      episodeId,
      episode.state,
      `episode ${episodeId} is ${episode.state}, not active: it cannot ${change}`,
    );
}

/**
 * Records an acknowledged `end`: remaining calls, timelines, reward and state, all in one transaction, so a crash
 * leaves either the whole end or none of it. Only an active episode can end.
 */
export function endEpisode(db: Database, episodeId: string, end: EpisodeEnd): EpisodeMeta {
  return db.transaction(() => {
    requireActive(db, episodeId, 'end');
    for (const call of end.calls) insertCall(db, episodeId, call);
    saveTimelines(db, episodeId, end.merge);
    return updateEpisodeState(db, episodeId, {
      state: 'ended',
      reward: end.reward,
      success: end.success ?? null,
      metrics: end.metrics ?? null,
      endedAt: end.endedAt ?? new Date().toISOString(),
    });
  })();
}

/** Marks an active episode aborted (never trained on); its stored calls stay for inspection. */
export function abortEpisode(
  db: Database,
  episodeId: string,
  reason: string,
  endedAt = new Date().toISOString(),
): EpisodeMeta {
  return db.transaction(() => {
    requireActive(db, episodeId, 'be aborted');
    return updateEpisodeState(db, episodeId, { state: 'aborted', abortReason: reason, endedAt });
  })();
}
