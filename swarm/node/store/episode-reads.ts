/**
 * The read model of one episode: its row, its calls (full, or light for the merge view), its stored merge, and the
 * export (swarm/common/timeline/export.ts) that the control API, the UI's merge view, the swarm and the CLI all
 * serve. Lists and search are in episode-list.ts; writes in episodes.ts.
 */
import type { Database } from 'better-sqlite3';
import type { Tokenizer } from '../../../worker/tokenizer/types.ts';
import { toMergeCalls, type CallRecord } from '../../common/timeline/call.ts';
import { buildEpisodeExport, type EpisodeExport, type EpisodeMeta } from '../../common/timeline/export.ts';
import { mergeTimelines, type MergeDecision, type MergeMode, type MergeResult } from '../../common/timeline/merge.ts';
import { EpisodeNotFoundError } from './episode-errors.ts';
import {
  FULL_CALL_COLUMNS,
  LIGHT_CALL_COLUMNS,
  callFromRow,
  episodeFromRow,
  lightCall,
  savingsFromColumn,
  timelineFromRow,
  type CallRow,
  type EpisodeRow,
  type TimelineRow,
} from './episode-rows.ts';
import { statement } from './statements.ts';

export function getEpisode(db: Database, episodeId: string): EpisodeMeta | undefined {
  const row = statement(db, 'SELECT * FROM episodes WHERE id = ?').get(episodeId) as EpisodeRow | undefined;
  return row && episodeFromRow(row);
}

export interface CallReadOptions {
  /** Without messages, tools and token arrays (read as empty): what the merge view needs of a call. */
  light?: boolean;
}

/** The episode's calls in order. */
export function getCalls(db: Database, episodeId: string, options: CallReadOptions = {}): CallRecord[] {
  const columns = options.light ? LIGHT_CALL_COLUMNS : FULL_CALL_COLUMNS;
  const rows = statement(db, `SELECT ${columns} FROM calls WHERE episode_id = ? ORDER BY idx`).all(
    episodeId,
  ) as CallRow[];
  return rows.map(callFromRow);
}

/** GET /api/episodes/:id: the episode and its calls in full. */
export interface EpisodeDetail {
  episode: EpisodeMeta;
  calls: CallRecord[];
}

export function getEpisodeDetail(db: Database, episodeId: string): EpisodeDetail | undefined {
  const episode = getEpisode(db, episodeId);
  return episode && { episode, calls: getCalls(db, episodeId) };
}

/** The stored merge of an episode (null when none was saved, e.g. while it is active). */
export function getTimelines(db: Database, episodeId: string): MergeResult | null {
  const episode = statement(db, 'SELECT merge_mode, merge_savings FROM episodes WHERE id = ?').get(episodeId) as
    | Pick<EpisodeRow, 'merge_mode' | 'merge_savings'>
    | undefined;
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  const savings = savingsFromColumn(episode.merge_savings);
  if (episode.merge_mode === null || savings === null) return null;
  const rows = statement(db, 'SELECT * FROM timelines WHERE episode_id = ? ORDER BY idx').all(
    episodeId,
  ) as TimelineRow[];
  // Decisions are stored with the timeline they placed a call in; put them back in call order.
  const callOrder = new Map(
    (
      statement(db, 'SELECT call_id, idx FROM calls WHERE episode_id = ?').all(episodeId) as Pick<
        CallRow,
        'call_id' | 'idx'
      >[]
    ).map((r) => [r.call_id, r.idx]),
  );
  const decisions = rows
    .flatMap((row) => JSON.parse(row.decisions) as MergeDecision[])
    .sort((a, b) => (callOrder.get(a.callId) ?? Infinity) - (callOrder.get(b.callId) ?? Infinity));
  return { mode: episode.merge_mode, timelines: rows.map(timelineFromRow), decisions, savings };
}

/** A tokenizer's spelling of ids; an id it does not know (another vocabulary's) reads as `<id>` instead of failing. */
export function tokenTextOf(tokenizer: Pick<Tokenizer, 'idToToken'>): (id: number) => string {
  return (id) => {
    try {
      return tokenizer.idToToken(id);
    } catch {
      return `<${id}>`;
    }
  };
}

export interface ExportOptions {
  /** Light calls (see CallReadOptions): the merge view's document; timelines, decisions and savings are the same. */
  lightCalls?: boolean;
}

/**
 * The export of an episode. Uses the stored timelines when no mode is asked for or they were saved in that mode;
 * otherwise merges the stored calls now (active and aborted episodes, or the other mode for comparison).
 */
export function getEpisodeExport(
  db: Database,
  episodeId: string,
  tokenizer: Pick<Tokenizer, 'idToToken'>,
  mode?: MergeMode,
  options: ExportOptions = {},
): EpisodeExport {
  const episode = getEpisode(db, episodeId);
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  const tokenText = tokenTextOf(tokenizer);
  const stored = getTimelines(db, episodeId);
  // Unless another mode is asked for, an ended episode shows the timelines it was stored (and trained) with.
  if (stored && (mode === undefined || stored.mode === mode))
    return buildEpisodeExport({ episode, calls: getCalls(db, episodeId, { light: options.lightCalls }), merge: stored, tokenText });
  // Merging needs the calls' token arrays, light or not.
  const calls = getCalls(db, episodeId);
  const merge = mergeTimelines(toMergeCalls(calls), mode ?? 'merged');
  return buildEpisodeExport({ episode, calls: options.lightCalls ? calls.map(lightCall) : calls, merge, tokenText });
}
