/**
 * Episodes on the control API (behind the control token), for the UI and `agentjet episodes`:
 *   GET /api/episodes?model=&taskId=&kind=&state=&limit=&offset=   newest first
 *   GET /api/episodes/:id                                          the episode and its calls
 *   GET /api/episodes/:id/export?mode=merged|naive                 the timeline export (swarm/common/timeline/export.ts)
 */
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import { episodeKindSchema, episodeStateSchema } from '../../common/timeline/export.ts';
import type { ControlRouter } from '../control/routes.ts';
import { badRequest, notFound } from '../http/errors.ts';
import { sendJson, validate } from '../http/respond.ts';
import type { ModelHost } from '../models/model-host.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { EpisodeQueryError, getCalls, getEpisode, getEpisodeExport, listEpisodes } from '../store/episodes.ts';

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
    const episode = getEpisode(db, params.id);
    if (!episode) throw notFound(`no episode ${params.id} in this peer's store`, 'episode_not_found');
    sendJson(res, 200, { episode, calls: getCalls(db, params.id) });
  });

  control.get('/api/episodes/:id/export', (_req, res, { params, url }) => {
    const mode = url.searchParams.get('mode') ?? 'merged';
    if (mode !== 'merged' && mode !== 'naive') throw badRequest('mode must be merged or naive', 'mode');
    const episode = getEpisode(db, params.id);
    if (!episode) throw notFound(`no episode ${params.id} in this peer's store`, 'episode_not_found');
    // Token texts come from the episode's model; a model no longer hosted falls back to byte spellings.
    const model = models.find(episode.model);
    const tokenizer = model && model.state !== 'loading' && model.state !== 'failed' ? model.tokenizer : builtinTokenizerBundle().tokenizer;
    sendJson(res, 200, getEpisodeExport(db, params.id, safeTokenTexts(tokenizer), mode));
  });
}

function safeTokenTexts(tokenizer: { idToToken(id: number): string }) {
  return {
    idToToken(id: number): string {
      try {
        return tokenizer.idToToken(id);
      } catch {
        return `<${id}>`;
      }
    },
  };
}
