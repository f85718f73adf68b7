/**
 * Episodes on the control API (behind the control token), for the UI and `agentjet episodes`:
 *   GET /api/episodes?model=&taskId=&kind=&state=&limit=&offset=   newest first
 *   GET /api/episodes/:id                                          the episode and its calls
 *   GET /api/episodes/:id/export?mode=merged|naive                 the timeline export (swarm/common/timeline/export.ts)
 * The reads are the store's read model (store/episode-reads.ts, store/episode-list.ts).
 */
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import type { Tokenizer } from '../../../worker/tokenizer/types.ts';
import { episodeKindSchema, episodeStateSchema } from '../../common/timeline/export.ts';
import type { ControlRouter } from '../control/routes.ts';
import { badRequest, notFound } from '../http/errors.ts';
import { sendJson, validate } from '../http/respond.ts';
import type { Handler } from '../http/router.ts';
import type { ModelHost } from '../models/model-host.ts';
import { EpisodeQueryError } from '../store/episode-errors.ts';
import { listEpisodes } from '../store/episode-list.ts';
import { getEpisode, getEpisodeDetail, getEpisodeExport, type ExportOptions } from '../store/episode-reads.ts';

const listQuerySchema = z.object({
  model: z.string().optional(),
  taskId: z.string().optional(),
  kind: episodeKindSchema.optional(),
  state: episodeStateSchema.optional(),
  limit: z.coerce.number().int().optional(),
  offset: z.coerce.number().int().optional(),
});

export function addEpisodeControlRoutes(control: ControlRouter, db: Database, models: ModelHost): void {
  control.get('/api/episodes', (_req, res, { url }) => {
    const query = validate(listQuerySchema, Object.fromEntries(url.searchParams));
    try {
      sendJson(res, 200, listEpisodes(db, query));
    } catch (err) {
      if (err instanceof EpisodeQueryError) throw badRequest(err.message);
      throw err;
    }
  });

  control.get('/api/episodes/:id', (_req, res, { params }) => {
    const detail = getEpisodeDetail(db, params.id);
    if (!detail) throw episodeNotFound(params.id);
    sendJson(res, 200, detail);
  });

  control.get('/api/episodes/:id/export', episodeExportHandler(db, models));
}

const episodeNotFound = (id: string) => notFound(`no episode ${id} in this peer's store`, 'episode_not_found');

/** Token texts come from the episode's model; a model not hosted (or not loaded) falls back to byte spellings. */
function exportTokenizer(models: Pick<ModelHost, 'find'> | undefined, model: string): Pick<Tokenizer, 'idToToken'> {
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
