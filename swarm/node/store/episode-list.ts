/**
 * Lists of episodes, one page at a time, with filters, the UI's text search and a sort, in one query per page (the
 * list rows carry their call count and merge savings); and the run's merge savings summed over its episodes.
 */
import type { Database } from 'better-sqlite3';
import { DEFAULT_EPISODE_SORT, type EpisodeSort } from '../../common/episode-query.ts';
import type { MergeTotals } from '../../common/api.ts';
import type { EpisodeKind, EpisodeMeta, EpisodeState } from '../../common/timeline/export.ts';
import type { MergeSavings } from '../../common/timeline/merge.ts';
import { EpisodeQueryError } from './episode-errors.ts';
import { episodeFromRow, savingsFromColumn, type EpisodeRow } from './episode-rows.ts';
import { episodeTextQuery } from './episode-text.ts';
import { statement } from './statements.ts';

/** A bound on page size keeps one request from loading a whole store. */
export const EPISODE_PAGE_MAX = 500;
export const EPISODE_PAGE_DEFAULT = 50;

/** Which episodes: every field given must hold (AND). Shared by the list (below) and the export (episode-export.ts). */
export interface EpisodeSelection {
  model?: string;
  taskId?: string;
  groupId?: string;
  kind?: EpisodeKind;
  state?: EpisodeState | readonly EpisodeState[];
  /** The client (runner name or peer id) that ran it, exactly. */
  client?: string;
  /** The policy version the episode began with, exactly. */
  policyVersion?: number;
  /** ISO times: created at or after `createdFrom`, before `createdBefore` (a training run's window). */
  createdFrom?: string;
  createdBefore?: string;
  /** Only these episodes (e.g. a train step's); an empty list selects none. */
  episodeIds?: readonly string[];
  /** Only the episodes a train step used (train_step_episodes). */
  trainStep?: { model: string; step: number };
  /**
   * Free text: episodes whose id, task, model, client, script hash or abort reason contains it (case-insensitive),
   * or whose calls' messages contain each of its words as a word prefix (episode-text.ts).
   */
  text?: string;
}

export interface EpisodeFilter extends EpisodeSelection {
  /** Default 'newest'. */
  sort?: EpisodeSort;
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

/**
 * Stored times are `Date.toISOString()` text, which sorts as time; a bound written any other ISO way (an offset,
 * no milliseconds) is rewritten in that form so that comparing text compares times.
 */
function storedTimeForm(value: string, field: string): string {
  const time = Date.parse(value);
  if (Number.isNaN(time)) throw new EpisodeQueryError(`${field} must be an ISO time, got "${value}"`);
  return new Date(time).toISOString();
}

/** The conditions of a selection over `episodes e` (none: an empty list) and their named parameters. */
export function selectionConditions(selection: EpisodeSelection): { conditions: string[]; params: Params } {
  const where: string[] = [];
  const params: Params = {};
  for (const [column, key] of [
    ['model', 'model'],
    ['task_id', 'taskId'],
    ['group_id', 'groupId'],
    ['kind', 'kind'],
    ['client', 'client'],
    ['policy_version', 'policyVersion'],
  ] as const) {
    const value = selection[key];
    if (value === undefined) continue;
    where.push(`e.${column} = @${key}`);
    params[key] = value;
  }
  if (selection.state !== undefined) {
    const states: readonly EpisodeState[] = typeof selection.state === 'string' ? [selection.state] : selection.state;
    const names = states.map((state, i) => {
      params[`state${i}`] = state;
      return `@state${i}`;
    });
    where.push(`e.state IN (${names.join(', ') || 'NULL'})`);
  }
  if (selection.createdFrom !== undefined) {
    params.createdFrom = storedTimeForm(selection.createdFrom, 'createdFrom');
    where.push('e.created_at >= @createdFrom');
  }
  if (selection.createdBefore !== undefined) {
    params.createdBefore = storedTimeForm(selection.createdBefore, 'createdBefore');
    where.push('e.created_at < @createdBefore');
  }
  if (selection.episodeIds !== undefined) {
    // One JSON parameter however many ids: no limit on bound variables, one statement for every list length.
    params.episodeIds = JSON.stringify(selection.episodeIds);
    where.push('e.id IN (SELECT value FROM json_each(@episodeIds))');
  }
  if (selection.trainStep !== undefined) {
    params.stepModel = selection.trainStep.model;
    params.step = selection.trainStep.step;
    where.push('e.id IN (SELECT episode_id FROM train_step_episodes WHERE model = @stepModel AND step = @step)');
  }
  if (selection.text !== undefined) {
    params.like = likePattern(selection.text);
    const like = ['id', 'task_id', 'model', 'client', 'script_hash', 'abort_reason'].map(
      (column) => `e.${column} LIKE @like ESCAPE '\\'`,
    );
    const words = episodeTextQuery(selection.text);
    if (words !== null) {
      params.words = words;
      like.push('e.id IN (SELECT episode_id FROM episode_text WHERE episode_text MATCH @words)');
    }
    where.push(`(${like.join(' OR ')})`);
  }
  return { conditions: where, params };
}

/** The WHERE clause of a selection (empty for none) and its named parameters. */
function whereClause(selection: EpisodeSelection): { clause: string; params: Params } {
  const { conditions, params } = selectionConditions(selection);
  return { clause: conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '', params };
}

/**
 * Every order ends in (created_at, id), so pages never overlap or skip rows that tie. Episodes without a reward
 * come last both ways: SQLite sorts NULL lowest, so `reward DESC` puts them last by itself, and `reward-asc` is
 * the exact reverse of `reward-desc` for the rewarded ones (ties oldest first). Written so that an index on
 * (reward, created_at, id) serves reward-desc read backwards and one on ((reward IS NULL), reward, created_at, id)
 * serves reward-asc read forwards.
 */
const ORDER_BY: Record<EpisodeSort, string> = {
  newest: 'e.created_at DESC, e.id DESC',
  oldest: 'e.created_at ASC, e.id ASC',
  'reward-desc': 'e.reward DESC, e.created_at DESC, e.id DESC',
  'reward-asc': '(e.reward IS NULL), e.reward ASC, e.created_at ASC, e.id ASC',
};

/** Episodes matching the filter, in its order (newest first by default). */
export function listEpisodes(db: Database, filter: EpisodeFilter = {}): EpisodePage {
  const limit = filter.limit ?? EPISODE_PAGE_DEFAULT;
  const offset = filter.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > EPISODE_PAGE_MAX)
    throw new EpisodeQueryError(`limit must be an integer from 1 to ${EPISODE_PAGE_MAX}`);
  if (!Number.isInteger(offset) || offset < 0) throw new EpisodeQueryError('offset must be a non-negative integer');
  const orderBy = ORDER_BY[filter.sort ?? DEFAULT_EPISODE_SORT];
  if (orderBy === undefined) throw new EpisodeQueryError(`sort must be one of ${Object.keys(ORDER_BY).join(', ')}`);
  const { clause, params } = whereClause(filter);
  const { total } = statement(db, `SELECT COUNT(*) AS total FROM episodes e ${clause}`).get(params) as {
    total: number;
  };
  const rows = statement(
    db,
    `SELECT e.*, (SELECT COUNT(*) FROM calls c WHERE c.episode_id = e.id) AS call_count
     FROM episodes e ${clause} ORDER BY ${orderBy} LIMIT @limit OFFSET @offset`,
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
export function sumRunSavings(db: Database, model: string | undefined): MergeTotals {
  const row = statement(
    db,
    `SELECT COUNT(*) AS episodes,
       COALESCE(SUM(json_extract(merge_savings, '$.calls')), 0) AS calls,
       COALESCE(SUM(json_extract(merge_savings, '$.naiveTokens')), 0) AS naiveTokens,
       COALESCE(SUM(json_extract(merge_savings, '$.mergedTokens')), 0) AS mergedTokens
     FROM episodes
     WHERE merge_savings IS NOT NULL AND merge_mode = 'merged' AND (@model IS NULL OR model = @model)`,
  ).get({ model: model ?? null }) as Pick<MergeTotals, 'episodes' | 'calls' | 'naiveTokens' | 'mergedTokens'>;
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
