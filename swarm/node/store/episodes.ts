/**
 * The episode repository: episodes, their calls token by token, the timelines they merged into, and the export
 * the merge view reads. Typed functions over a better-sqlite3 handle (opened by db.ts); rows are mapped to the
 * shared types in swarm/common/timeline. Writes that belong together (an acknowledged `end`) run in one transaction.
 */
import type { Database } from 'better-sqlite3';
import type { Tokenizer } from '../../../worker/tokenizer/types.ts';
import { toMergeCalls, type CallRecord } from '../../common/timeline/call.ts';
import {
  buildEpisodeExport,
  type EpisodeExport,
  type EpisodeKind,
  type EpisodeMeta,
  type EpisodeState,
} from '../../common/timeline/export.ts';
import {
  mergeTimelines,
  type MergeDecision,
  type MergeMode,
  type MergeResult,
  type MergeSavings,
  type Timeline,
} from '../../common/timeline/merge.ts';
import { statement } from './statements.ts';
import { decodeFloat32, decodeInt32, decodeMask, encodeFloat32, encodeInt32, encodeMask } from './blobs.ts';

export class EpisodeNotFoundError extends Error {
  override name = 'EpisodeNotFoundError';
  constructor(readonly episodeId: string) {
    super(`episode ${episodeId} does not exist`);
  }
}

export class EpisodeExistsError extends Error {
  override name = 'EpisodeExistsError';
  constructor(readonly episodeId: string) {
    super(`episode ${episodeId} already exists`);
  }
}

/** The episode is not in a state that allows the change (e.g. ending an aborted episode). */
export class EpisodeStateError extends Error {
  override name = 'EpisodeStateError';
  constructor(
    readonly episodeId: string,
    readonly state: EpisodeState,
    message: string,
  ) {
    super(message);
  }
}

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
  const result = db
    .prepare(`UPDATE episodes SET ${sets} WHERE id = ?`)
    .run(...columns.map(([, value]) => value), episodeId);
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
    const updated = db
      .prepare('UPDATE episodes SET merge_mode = ?, merge_savings = ? WHERE id = ?')
      .run(merge.mode, JSON.stringify(merge.savings), episodeId);
    if (updated.changes === 0) throw new EpisodeNotFoundError(episodeId);
    db.prepare('DELETE FROM timelines WHERE episode_id = ?').run(episodeId);
    const insert = db.prepare(
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

/**
 * Records an acknowledged `end`: remaining calls, timelines, reward and state, all in one transaction, so a crash
 * leaves either the whole end or none of it. Only an active episode can end.
 */
export function endEpisode(db: Database, episodeId: string, end: EpisodeEnd): EpisodeMeta {
  return db.transaction(() => {
    const episode = getEpisode(db, episodeId);
    if (!episode) throw new EpisodeNotFoundError(episodeId);
    if (episode.state !== 'active')
      throw new EpisodeStateError(
        episodeId,
        episode.state,
        `episode ${episodeId} is ${episode.state}, not active: it cannot end`,
      );
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
    const episode = getEpisode(db, episodeId);
    if (!episode) throw new EpisodeNotFoundError(episodeId);
    if (episode.state !== 'active')
      throw new EpisodeStateError(
        episodeId,
        episode.state,
        `episode ${episodeId} is ${episode.state}, not active: it cannot be aborted`,
      );
    return updateEpisodeState(db, episodeId, { state: 'aborted', abortReason: reason, endedAt });
  })();
}

interface EpisodeRow {
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

function episodeFromRow(row: EpisodeRow): EpisodeMeta {
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

export function getEpisode(db: Database, episodeId: string): EpisodeMeta | undefined {
  const row = statement(db, 'SELECT * FROM episodes WHERE id = ?').get(episodeId) as EpisodeRow | undefined;
  return row && episodeFromRow(row);
}

interface CallRow {
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

/** The episode's calls in order. */
export function getCalls(db: Database, episodeId: string): CallRecord[] {
  const rows = db
    .prepare('SELECT * FROM calls WHERE episode_id = ? ORDER BY idx')
    .all(episodeId) as CallRow[];
  return rows.map((row) => ({
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
  }));
}

interface TimelineRow {
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

/** The stored merge of an episode (null when none was saved, e.g. while it is active). */
export function getTimelines(db: Database, episodeId: string): MergeResult | null {
  const episode = db.prepare('SELECT merge_mode, merge_savings FROM episodes WHERE id = ?').get(episodeId) as
    Pick<EpisodeRow, 'merge_mode' | 'merge_savings'> | undefined;
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  if (episode.merge_mode === null || episode.merge_savings === null) return null;
  const rows = db
    .prepare('SELECT * FROM timelines WHERE episode_id = ? ORDER BY idx')
    .all(episodeId) as TimelineRow[];
  const timelines: Timeline[] = rows.map((row) => {
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
  });
  // Decisions are stored with the timeline they placed a call in; put them back in call order.
  const callOrder = new Map(
    (
      db.prepare('SELECT call_id, idx FROM calls WHERE episode_id = ?').all(episodeId) as {
        call_id: string;
        idx: number;
      }[]
    ).map((r) => [r.call_id, r.idx]),
  );
  const decisions = rows
    .flatMap((row) => JSON.parse(row.decisions) as MergeDecision[])
    .sort((a, b) => (callOrder.get(a.callId) ?? Infinity) - (callOrder.get(b.callId) ?? Infinity));
  return {
    mode: episode.merge_mode,
    timelines,
    decisions,
    savings: JSON.parse(episode.merge_savings) as MergeSavings,
  };
}

export interface EpisodeFilter {
  model?: string;
  taskId?: string;
  groupId?: string;
  kind?: EpisodeKind;
  state?: EpisodeState | EpisodeState[];
  /** Page size, 1–500 (default 50). */
  limit?: number;
  offset?: number;
}

export interface EpisodeListItem extends EpisodeMeta {
  calls: number;
  savings: MergeSavings | null;
}

export interface EpisodePage {
  episodes: EpisodeListItem[];
  /** Episodes matching the filter, all pages together. */
  total: number;
}

/** A bound on page size keeps one request from loading a whole store. */
const MAX_PAGE = 500;

export class EpisodeQueryError extends Error {
  override name = 'EpisodeQueryError';
}

/** Episodes matching the filter, newest first. */
export function listEpisodes(db: Database, filter: EpisodeFilter = {}): EpisodePage {
  const limit = filter.limit ?? 50;
  const offset = filter.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
    throw new EpisodeQueryError(`limit must be an integer from 1 to ${MAX_PAGE}`);
  if (!Number.isInteger(offset) || offset < 0)
    throw new EpisodeQueryError('offset must be a non-negative integer');
  const where: string[] = [];
  const params: unknown[] = [];
  const equals = (column: string, value: string | undefined) => {
    if (value === undefined) return;
    where.push(`${column} = ?`);
    params.push(value);
  };
  equals('model', filter.model);
  equals('task_id', filter.taskId);
  equals('group_id', filter.groupId);
  equals('kind', filter.kind);
  if (filter.state !== undefined) {
    const states = Array.isArray(filter.state) ? filter.state : [filter.state];
    where.push(`state IN (${states.map(() => '?').join(', ') || 'NULL'})`);
    params.push(...states);
  }
  const clause = where.length > 0 ? `WHERE ${where.join(' AND ')}` : '';
  const { total } = db.prepare(`SELECT COUNT(*) AS total FROM episodes ${clause}`).get(...params) as {
    total: number;
  };
  const rows = db
    .prepare(
      `SELECT e.*, (SELECT COUNT(*) FROM calls c WHERE c.episode_id = e.id) AS call_count
       FROM episodes e ${clause} ORDER BY e.created_at DESC, e.id DESC LIMIT ? OFFSET ?`,
    )
    .all(...params, limit, offset) as (EpisodeRow & { call_count: number })[];
  return {
    total,
    episodes: rows.map((row) => ({
      ...episodeFromRow(row),
      calls: row.call_count,
      savings: row.merge_savings === null ? null : (JSON.parse(row.merge_savings) as MergeSavings),
    })),
  };
}

/**
 * The merge view's document for an episode. Uses the stored timelines when they were saved in the mode asked for;
 * otherwise merges the stored calls now (active and aborted episodes, or the naive comparison).
 */
export function getEpisodeExport(
  db: Database,
  episodeId: string,
  tokenizer: Pick<Tokenizer, 'idToToken'>,
  mode: MergeMode = 'merged',
): EpisodeExport {
  const episode = getEpisode(db, episodeId);
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  const calls = getCalls(db, episodeId);
  const stored = getTimelines(db, episodeId);
  const merge = stored?.mode === mode ? stored : mergeTimelines(toMergeCalls(calls), mode);
  return buildEpisodeExport({ episode, calls, merge, tokenText: (id) => tokenizer.idToToken(id) });
}
