/**
 * Read-only control routes the desktop UI needs beyond the episode API (behind the control token):
 *   GET /api/ui/episodes?q=&model=&taskId=&kind=&state=&limit=&offset=   episodes whose id, task, model, client,
 *        script hash or abort reason contains `q` (case-insensitive), or whose calls' messages contain every word of
 *        `q` (as word prefixes; store/episode-text.ts), newest first; same page shape as /api/episodes
 *   GET /api/ui/savings?model=                                              merge savings summed over the ended
 *        episodes of a model (or all models): what merging saved for the whole run
 *   GET /api/ui/episodes/:id/merge?mode=merged|naive                        the merge view's document: the episode
 *        export (swarm/common/timeline/export.ts) with the timelines in full but the calls without their token
 *        arrays and messages (a 50-turn episode's calls repeat its history 50 times: megabytes the view never draws;
 *        /api/episodes/:id has them)
 * Registered by the peer runtime: `addUiRoutes(runtime.control, runtime.db, runtime.serving.models)`.
 */
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import type { RunSavings } from '../../common/api.ts';
import type { CallRecord } from '../../common/timeline/call.ts';
import {
  buildEpisodeExport,
  episodeKindSchema,
  episodeStateSchema,
  type EpisodeExport,
} from '../../common/timeline/export.ts';
import { mergeTimelines, type MergeMode, type MergeSavings } from '../../common/timeline/merge.ts';
import { toMergeCalls } from '../../common/timeline/call.ts';
import { badRequest, notFound } from '../http/errors.ts';
import { sendJson, validate } from '../http/respond.ts';
import type { ModelHost } from '../models/model-host.ts';
import { episodeTextQuery } from '../store/episode-text.ts';
import { getCalls, getEpisode, getTimelines } from '../store/episodes.ts';
import type { ControlRouter } from './routes.ts';

/** Same bound as the episode list: one request never loads a whole store. */
const MAX_PAGE = 500;

const searchQuerySchema = z.object({
  q: z.string().min(1).max(200),
  model: z.string().optional(),
  taskId: z.string().optional(),
  kind: episodeKindSchema.optional(),
  state: episodeStateSchema.optional(),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
  offset: z.coerce.number().int().min(0).default(0),
});

const savingsQuerySchema = z.object({ model: z.string().optional() });

export function addUiRoutes(control: ControlRouter, db: Database, models?: Pick<ModelHost, 'find'>): void {
  control.get('/api/ui/episodes', (_req, res, { url }) => {
    const query = validate(searchQuerySchema, Object.fromEntries(url.searchParams));
    sendJson(res, 200, searchEpisodes(db, query));
  });
  control.get('/api/ui/savings', (_req, res, { url }) => {
    const { model } = validate(savingsQuerySchema, Object.fromEntries(url.searchParams));
    sendJson(res, 200, runSavings(db, model));
  });
  control.get('/api/ui/episodes/:id/merge', (_req, res, { params, url }) => {
    const mode = url.searchParams.get('mode') ?? 'merged';
    if (mode !== 'merged' && mode !== 'naive') throw badRequest('mode must be merged or naive', 'mode');
    if (!getEpisode(db, params.id))
      throw notFound(`no episode ${params.id} in this peer's store`, 'episode_not_found');
    sendJson(
      res,
      200,
      mergeViewDocument(db, params.id, tokenTexts(models, getEpisode(db, params.id)!.model), mode),
    );
  });
}

/** The vocabulary's spelling of ids: the episode's model's tokenizer, or byte spellings when it is not hosted. */
function tokenTexts(models: Pick<ModelHost, 'find'> | undefined, model: string): (id: number) => string {
  const hosted = models?.find(model);
  const tokenizer =
    hosted && hosted.state !== 'loading' && hosted.state !== 'failed'
      ? hosted.tokenizer
      : builtinTokenizerBundle().tokenizer;
  return (id) => {
    try {
      return tokenizer.idToToken(id);
    } catch {
      return `<${id}>`;
    }
  };
}

/** The export with light calls: timelines, decisions and savings exactly as /api/episodes/:id/export has them. */
export function mergeViewDocument(
  db: Database,
  episodeId: string,
  tokenText: (id: number) => string,
  mode: MergeMode,
): EpisodeExport {
  const episode = getEpisode(db, episodeId)!;
  const stored = getTimelines(db, episodeId);
  if (stored?.mode === mode)
    return buildEpisodeExport({ episode, calls: lightCalls(db, episodeId), merge: stored, tokenText });
  // Not stored in this mode (an active episode, or the naive comparison): merge the full calls now.
  const calls = getCalls(db, episodeId);
  const light: CallRecord[] = calls.map((call) => ({
    ...call,
    messages: [],
    promptIds: [],
    generatedIds: [],
    logprobs: [],
  }));
  return buildEpisodeExport({
    episode,
    calls: light,
    merge: mergeTimelines(toMergeCalls(calls), mode),
    tokenText,
  });
}

interface LightCallRow {
  idx: number;
  call_id: string;
  agent_key: string;
  assistant_message: string | null;
  finish_reason: string | null;
  policy_version: number;
  started_at: string;
  first_token_at: string | null;
  ended_at: string;
  splice: string;
}

/** The calls without their token blobs and messages: reading those is most of an export's cost on long episodes. */
function lightCalls(db: Database, episodeId: string): CallRecord[] {
  const rows = db
    .prepare(
      `SELECT idx, call_id, agent_key, assistant_message, finish_reason, policy_version, started_at, first_token_at, ended_at, splice
       FROM calls WHERE episode_id = ? ORDER BY idx`,
    )
    .all(episodeId) as LightCallRow[];
  return rows.map((row) => ({
    callId: row.call_id,
    index: row.idx,
    agentKey: row.agent_key,
    messages: [],
    tools: null,
    promptIds: [],
    generatedIds: [],
    logprobs: [],
    assistantMessage: row.assistant_message === null ? null : JSON.parse(row.assistant_message),
    finishReason: row.finish_reason,
    policyVersion: row.policy_version,
    timings: { startedAt: row.started_at, firstTokenAt: row.first_token_at, endedAt: row.ended_at },
    splice: JSON.parse(row.splice),
  }));
}

export type EpisodeSearch = z.infer<typeof searchQuerySchema>;

/** LIKE's wildcards in user text are matched literally. */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export function searchEpisodes(db: Database, query: EpisodeSearch) {
  const words = episodeTextQuery(query.q);
  const saidInCalls = words === null ? '' : ' OR id IN (SELECT episode_id FROM episode_text WHERE episode_text MATCH @words)';
  const where = [
    `(id LIKE @q ESCAPE '\\' OR task_id LIKE @q ESCAPE '\\' OR model LIKE @q ESCAPE '\\' OR client LIKE @q ESCAPE '\\'
      OR script_hash LIKE @q ESCAPE '\\' OR abort_reason LIKE @q ESCAPE '\\'${saidInCalls})`,
  ];
  const params: Record<string, unknown> = { q: likePattern(query.q) };
  if (words !== null) params.words = words;
  for (const [column, key] of [
    ['model', 'model'],
    ['task_id', 'taskId'],
    ['kind', 'kind'],
    ['state', 'state'],
  ] as const) {
    if (query[key] === undefined) continue;
    where.push(`${column} = @${key}`);
    params[key] = query[key];
  }
  const clause = `WHERE ${where.join(' AND ')}`;
  const { total } = db.prepare(`SELECT COUNT(*) AS total FROM episodes ${clause}`).get(params) as {
    total: number;
  };
  const rows = db
    .prepare(
      `SELECT e.id, e.merge_savings, (SELECT COUNT(*) FROM calls c WHERE c.episode_id = e.id) AS calls
       FROM episodes e ${clause} ORDER BY e.created_at DESC, e.id DESC LIMIT @limit OFFSET @offset`,
    )
    .all({ ...params, limit: query.limit, offset: query.offset }) as {
    id: string;
    merge_savings: string | null;
    calls: number;
  }[];
  return {
    total,
    episodes: rows.map((row) => ({
      ...getEpisode(db, row.id)!,
      calls: row.calls,
      savings: row.merge_savings === null ? null : (JSON.parse(row.merge_savings) as MergeSavings),
    })),
  };
}

export function runSavings(db: Database, model: string | undefined): RunSavings {
  const row = db
    .prepare(
      `SELECT COUNT(*) AS episodes,
         COALESCE(SUM(json_extract(merge_savings, '$.calls')), 0) AS calls,
         COALESCE(SUM(json_extract(merge_savings, '$.naiveTokens')), 0) AS naiveTokens,
         COALESCE(SUM(json_extract(merge_savings, '$.mergedTokens')), 0) AS mergedTokens
       FROM episodes
       WHERE merge_savings IS NOT NULL AND merge_mode = 'merged' AND (@model IS NULL OR model = @model)`,
    )
    .get({ model: model ?? null }) as {
    episodes: number;
    calls: number;
    naiveTokens: number;
    mergedTokens: number;
  };
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
