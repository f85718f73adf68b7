/**
 * Lists of episodes, one page at a time, with filters and the UI's text search, in one query per page (the list
 * rows carry their call count and merge savings); and the run's merge savings summed over its episodes.
 */
import type { Database } from 'better-sqlite3';
import type { RunSavings } from '../../common/api.ts';
import type { EpisodeKind, EpisodeMeta, EpisodeState } from '../../common/timeline/export.ts';
import type { MergeSavings } from '../../common/timeline/merge.ts';
import { EpisodeQueryError } from './episode-errors.ts';
import { episodeFromRow, savingsFromColumn, type EpisodeRow } from './episode-rows.ts';
import { episodeTextQuery } from './episode-text.ts';
import { statement } from './statements.ts';

/** A bound on page size keeps one request from loading a whole store. */
export const EPISODE_PAGE_MAX = 500;
export const EPISODE_PAGE_DEFAULT = 50;

export interface EpisodeFilter {
  model?: string;
  taskId?: string;
  groupId?: string;
  kind?: EpisodeKind;
  state?: EpisodeState | EpisodeState[];
  /**
   * Free text: episodes whose id, task, model, client, script hash or abort reason contains it (case-insensitive),
   * or whose calls' messages contain each of its words as a word prefix (episode-text.ts).
   */
  text?: string;
  /** Page size, 1 to EPISODE_PAGE_MAX (default EPISODE_PAGE_DEFAULT). */
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

type Params = Record<string, string | number>;

/** LIKE's wildcards in user text are matched literally. */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The WHERE clause of a filter (empty for none) and its named parameters. */
function whereClause(filter: EpisodeFilter): { clause: string; params: Params } {
  const where: string[] = [];
  const params: Params = {};
  for (const [column, key] of [
    ['model', 'model'],
    ['task_id', 'taskId'],
    ['group_id', 'groupId'],
    ['kind', 'kind'],
  ] as const) {
    const value = filter[key];
    if (value === undefined) continue;
    where.push(`e.${column} = @${key}`);
    params[key] = value;
  }
  if (filter.state !== undefined) {
    const states = Array.isArray(filter.state) ? filter.state : [filter.state];
    const names = states.map((state, i) => {
      params[`state${i}`] = state;
      return `@state${i}`;
    });
    where.push(`e.state IN (${names.join(', ') || 'NULL'})`);
  }
  if (filter.text !== undefined) {
    params.like = likePattern(filter.text);
    const like = ['id', 'task_id', 'model', 'client', 'script_hash', 'abort_reason'].map(
      (column) => `e.${column} LIKE @like ESCAPE '\\'`,
    );
    const words = episodeTextQuery(filter.text);
    if (words !== null) {
      params.words = words;
      like.push('e.id IN (SELECT episode_id FROM episode_text WHERE episode_text MATCH @words)');
    }
    where.push(`(${like.join(' OR ')})`);
  }
  return { clause: where.length > 0 ? `WHERE ${where.join(' AND ')}` : '', params };
}

/** Episodes matching the filter, newest first. */
export function listEpisodes(db: Database, filter: EpisodeFilter = {}): EpisodePage {
  const limit = filter.limit ?? EPISODE_PAGE_DEFAULT;
  const offset = filter.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > EPISODE_PAGE_MAX)
    throw new EpisodeQueryError(`limit must be an integer from 1 to ${EPISODE_PAGE_MAX}`);
  if (!Number.isInteger(offset) || offset < 0) throw new EpisodeQueryError('offset must be a non-negative integer');
  const { clause, params } = whereClause(filter);
  const { total } = statement(db, `SELECT COUNT(*) AS total FROM episodes e ${clause}`).get(params) as {
    total: number;
  };
  const rows = statement(
    db,
    `SELECT e.*, (SELECT COUNT(*) FROM calls c WHERE c.episode_id = e.id) AS call_count
     FROM episodes e ${clause} ORDER BY e.created_at DESC, e.id DESC LIMIT @limit OFFSET @offset`,
  ).all({ ...params, limit, offset }) as (EpisodeRow & { call_count: number })[];
  return {
    total,
    episodes: rows.map((row) => ({
      ...episodeFromRow(row),
      calls: row.call_count,
      savings: savingsFromColumn(row.merge_savings),
    })),
  };
}

/** What merging saved over a model's (or every model's) episodes stored in merged mode. */
export function sumRunSavings(db: Database, model: string | undefined): RunSavings {
  const row = statement(
    db,
    `SELECT COUNT(*) AS episodes,
       COALESCE(SUM(json_extract(merge_savings, '$.calls')), 0) AS calls,
       COALESCE(SUM(json_extract(merge_savings, '$.naiveTokens')), 0) AS naiveTokens,
       COALESCE(SUM(json_extract(merge_savings, '$.mergedTokens')), 0) AS mergedTokens
     FROM episodes
     WHERE merge_savings IS NOT NULL AND merge_mode = 'merged' AND (@model IS NULL OR model = @model)`,
  ).get({ model: model ?? null }) as Pick<RunSavings, 'episodes' | 'calls' | 'naiveTokens' | 'mergedTokens'>;
  return {
    model: model ?? null,
    episodes: row.episodes,
    calls: row.calls,
    naiveTokens: row.naiveTokens,
    mergedTokens: row.mergedTokens,
    savedTokens: row.naiveTokens - row.mergedTokens,
    tokenRatio: row.mergedTokens > 0 ? row.naiveTokens / row.mergedTokens : 1,
  };
}
