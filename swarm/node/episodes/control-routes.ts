/**
 * Episodes on the control API (behind the control token), for the UI and `agentjet episodes`:
 *   GET /api/episodes?<selection>&sort=&limit=&offset=    one page, newest first unless `sort` says otherwise
 *   GET /api/episodes.jsonl?<selection>&mode=             every selected episode's export, one JSON line each,
 *                                                          oldest first, streamed (application/x-ndjson)
 *   GET /api/episodes/:id                                 the episode and its calls
 *   GET /api/episodes/:id/export?mode=merged|naive        the timeline export (swarm/common/timeline/export.ts)
 * <selection>: model, taskId, groupId, kind, client, policyVersion (exact); state (one, or several comma-separated);
 * createdFrom / createdBefore (ISO times, [from, before)); episodeIds (comma-separated); step (a train step of
 * `model`: the episodes it trained on). A bad value is 400 InvalidRequestError naming the parameter in `field`.
 * The reads are the store's read model (store/episode-reads.ts, store/episode-list.ts, store/episode-export.ts).
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import type { Tokenizer } from '../../../worker/tokenizer/types.ts';
import { EPISODE_SORTS } from '../../common/episode-query.ts';
import {
  episodeKindSchema,
  episodeStateSchema,
  type EpisodeExport,
  type EpisodeState,
} from '../../common/timeline/export.ts';
import type { MergeMode } from '../../common/timeline/merge.ts';
import type { ControlRouter } from '../control/routes.ts';
import { badRequest, notFound } from '../http/errors.ts';
import { sendJson, validate } from '../http/respond.ts';
import type { Handler } from '../http/router.ts';
import type { ModelHost } from '../models/model-host.ts';
import { EpisodeQueryError } from '../store/episode-errors.ts';
import { exportEpisodes } from '../store/episode-export.ts';
import { EPISODE_PAGE_MAX, listEpisodes, type EpisodeFilter, type EpisodeSelection } from '../store/episode-list.ts';
import { getEpisode, getEpisodeDetail, getEpisodeExport, type ExportOptions } from '../store/episode-reads.ts';

/** Longest name, id or task a query may carry: real ones are short, and a bound keeps hostile ones out of SQL. */
const MAX_NAME_CHARS = 200;
/** Most ids `episodeIds` may list: a train step's episodes (hundreds), well inside a URL's size. */
export const MAX_EPISODE_IDS = 1_000;
/** Largest policy version or step a query may name: beyond it a number is no longer exact in JavaScript. */
const MAX_COUNT = Number.MAX_SAFE_INTEGER;

const name = z.string().min(1, 'must not be empty').max(MAX_NAME_CHARS);

/** A whole number from the query string: digits only (no `1e3`, no `-1`, no empty value read as 0). */
const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const isoTime = z.union([z.iso.datetime({ offset: true }), z.iso.date()], {
  error: 'must be an ISO time, e.g. 2026-01-31T12:00:00Z or 2026-01-31',
});

/** `a,b,c`: each item checked by `item`; an issue names the parameter, not the item's index. */
const commaList = <T>(item: z.ZodType<T>, maxItems: number, what: string) =>
  z
    .string()
    .max(maxItems * (MAX_NAME_CHARS + 1))
    .transform((text, ctx) => {
      const items = text.split(',');
      if (items.length > maxItems) {
        ctx.addIssue({ code: 'custom', message: `lists at most ${maxItems} ${what}` });
        return z.NEVER;
      }
      const parsed: T[] = [];
      for (const raw of items) {
        const result = item.safeParse(raw);
        if (!result.success) {
          ctx.addIssue({ code: 'custom', message: `"${raw.slice(0, 40)}" is not ${what}` });
          return z.NEVER;
        }
        parsed.push(result.data);
      }
      return parsed;
    });

const ALLOWED_STATES = episodeStateSchema.options.join(', ');

/** The query parameters that select episodes, for the list, the search and the JSONL export. */
export const episodeSelectionQueryShape = {
  model: name.optional(),
  taskId: name.optional(),
  groupId: name.optional(),
  kind: episodeKindSchema.optional(),
  state: commaList<EpisodeState>(episodeStateSchema, episodeStateSchema.options.length, `an episode state (${ALLOWED_STATES})`).optional(),
  client: name.optional(),
  policyVersion: wholeNumber(0, MAX_COUNT).optional(),
  createdFrom: isoTime.optional(),
  createdBefore: isoTime.optional(),
  episodeIds: commaList(name, MAX_EPISODE_IDS, 'an episode id').optional(),
  step: wholeNumber(0, MAX_COUNT).optional(),
};

/** Paging and order of a list. */
export const episodePageQueryShape = {
  sort: z.enum(EPISODE_SORTS, { error: `must be one of ${EPISODE_SORTS.join(', ')}` }).optional(),
  limit: wholeNumber(1, EPISODE_PAGE_MAX).optional(),
  offset: wholeNumber(0, MAX_COUNT).optional(),
};

type SelectionQuery = z.infer<z.ZodObject<typeof episodeSelectionQueryShape>>;

/** A train step is named within its model. */
export function stepNeedsModel(query: Pick<SelectionQuery, 'step' | 'model'>, ctx: z.RefinementCtx): void {
  if (query.step !== undefined && query.model === undefined)
    ctx.addIssue({ code: 'custom', path: ['step'], message: 'step needs model: a train step is named within its model' });
}

/** The store's selection for validated query parameters. */
export function selectionFromQuery({ step, state, ...rest }: SelectionQuery): EpisodeSelection {
  return {
    ...rest,
    ...(state === undefined ? {} : { state }),
    ...(step === undefined || rest.model === undefined ? {} : { trainStep: { model: rest.model, step } }),
  };
}

const listQuerySchema = z.object({ ...episodeSelectionQueryShape, ...episodePageQueryShape }).superRefine(stepNeedsModel);

const exportQuerySchema = z
  .object({ ...episodeSelectionQueryShape, mode: z.enum(['merged', 'naive'], { error: 'must be merged or naive' }).optional() })
  .superRefine(stepNeedsModel);

/** Query parameters of the list routes (/api/episodes, /api/ui/episodes) as the store's filter. */
export function listFilterFromQuery(query: z.infer<typeof listQuerySchema>): EpisodeFilter {
  const { sort, limit, offset, ...selection } = query;
  return { ...selectionFromQuery(selection), sort, limit, offset };
}

/** The list, with the store's own bound errors answered as 400. */
export function sendEpisodePage(res: ServerResponse, db: Database, filter: EpisodeFilter): void {
  try {
    sendJson(res, 200, listEpisodes(db, filter));
  } catch (err) {
    if (err instanceof EpisodeQueryError) throw badRequest(err.message);
    throw err;
  }
}

export function addEpisodeControlRoutes(control: ControlRouter, db: Database, models: ModelHost): void {
  control.get('/api/episodes', (_req, res, { url }) => {
    sendEpisodePage(res, db, listFilterFromQuery(validate(listQuerySchema, Object.fromEntries(url.searchParams))));
  });

  control.get('/api/episodes.jsonl', async (_req, res, { url }) => {
    const { mode, ...selection } = validate(exportQuerySchema, Object.fromEntries(url.searchParams));
    await streamEpisodeExports(res, db, selectionFromQuery(selection), models, mode);
  });

  control.get('/api/episodes/:id', (_req, res, { params }) => {
    const detail = getEpisodeDetail(db, params.id);
    if (!detail) throw episodeNotFound(params.id);
    sendJson(res, 200, detail);
  });

  control.get('/api/episodes/:id/export', episodeExportHandler(db, models));
}

export const episodeNotFound = (id: string) => notFound(`no episode ${id} in this peer's store`, 'episode_not_found');

/** Exports between two turns of the event loop: a long export must not keep the gateway's requests waiting. */
const EXPORTS_PER_TURN = 50;

/**
 * Writes each export as one JSON line, as fast as the client reads: a full socket buffer waits for 'drain', and a
 * client that hangs up stops the reads. Errors after the first line cannot become a status any more; the response
 * is then destroyed, so the client sees a broken transfer, never a short file that looks complete.
 */
async function streamEpisodeExports(
  res: ServerResponse,
  db: Database,
  selection: EpisodeSelection,
  models: Pick<ModelHost, 'find'>,
  mode: MergeMode | undefined,
): Promise<void> {
  const records = exportEpisodes(db, selection, (model) => exportTokenizer(models, model), { mode });
  // The first record is read before the headers go out, so a bad selection (or a failed read) is still a status.
  let next: IteratorResult<EpisodeExport, void>;
  try {
    next = records.next();
  } catch (err) {
    if (err instanceof EpisodeQueryError) throw badRequest(err.message);
    throw err;
  }
  let hungUp = false;
  res.once('close', () => (hungUp = true));
  res.writeHead(200, {
    'content-type': 'application/x-ndjson; charset=utf-8',
    'content-disposition': 'attachment; filename="episodes.jsonl"',
    'cache-control': 'no-store',
  });
  try {
    for (let written = 0; !next.done && !hungUp; next = records.next()) {
      if (!res.write(`${JSON.stringify(next.value)}\n`)) await drainedOrClosed(res);
      if (++written % EXPORTS_PER_TURN === 0) await yieldToEventLoop();
    }
  } catch (err) {
    records.return();
    res.destroy();
    throw err; // logged by the server's error boundary, which answers nothing more once a stream has begun
  }
  records.return();
  if (!hungUp) res.end();
}

/** Waits for room in the socket's buffer or for the client to go; removes both listeners either way. */
async function drainedOrClosed(res: ServerResponse): Promise<void> {
  if (res.destroyed) return;
  const settled = new AbortController();
  try {
    await Promise.race([once(res, 'drain', { signal: settled.signal }), once(res, 'close', { signal: settled.signal })]);
  } finally {
    settled.abort();
  }
}

/** Token texts come from the episode's model; a model not hosted (or not loaded) falls back to byte spellings. */
export function exportTokenizer(models: Pick<ModelHost, 'find'> | undefined, model: string): Pick<Tokenizer, 'idToToken'> {
  const hosted = models?.find(model);
  return hosted && hosted.state !== 'loading' && hosted.state !== 'failed'
    ? hosted.tokenizer
    : builtinTokenizerBundle().tokenizer;
}

/**
 * `GET …/:id/…?mode=merged|naive`: an episode's export (by default in the mode it was stored with). Serves /api/episodes/:id/export and, with light calls, the
 * UI's merge view (control/ui-routes.ts).
 */
export function episodeExportHandler(
  db: Database,
  models: Pick<ModelHost, 'find'> | undefined,
  options: ExportOptions = {},
): Handler {
  return (_req, res, { params, url }) => {
    // No mode: the timelines stored when the episode ended (merged in the mode its model trains with).
    const mode = url.searchParams.get('mode') ?? undefined;
    if (mode !== undefined && mode !== 'merged' && mode !== 'naive') throw badRequest('mode must be merged or naive', 'mode');
    const episode = getEpisode(db, params.id);
    if (!episode) throw episodeNotFound(params.id);
    sendJson(res, 200, getEpisodeExport(db, params.id, exportTokenizer(models, episode.model), mode, options));
  };
}
