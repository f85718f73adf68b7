/**
 * Read-only control routes the desktop UI needs beyond the episode API (behind the control token):
 *   GET /api/ui/episodes?q=&<selection>&sort=&limit=&offset=   episodes whose id, task, model, client,
 *        script hash or abort reason contains `q` (case-insensitive), or whose calls' messages contain every word of
 *        `q` (as word prefixes; store/episode-text.ts), newest first unless `sort` says otherwise; the same
 *        selection parameters and page shape as /api/episodes (episodes/control-routes.ts)
 *   GET /api/ui/savings?model=                                              merge savings summed over the ended
 *        episodes of a model (or all models): what merging saved for the whole run
 *   GET /api/ui/episodes/:id/merge?mode=merged|naive                        the merge view's document: the episode
 *        export (swarm/common/timeline/export.ts) with the timelines in full but the calls without their token
 *        arrays and messages (a 50-turn episode's calls repeat its history 50 times: megabytes the view never draws;
 *        /api/episodes/:id has them)
 *   GET /api/ui/episodes/:id/group                                          how much of the episode its GRPO group
 *        shares (swarm/common/api.ts EpisodeGroupShare; episodes/group-share.ts)
 * The reads are the store's read model (store/episode-list.ts, store/episode-reads.ts).
 * Registered by the peer runtime: `addUiRoutes(runtime.control, runtime.db, runtime.serving.models)`.
 */
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import {
  episodeExportHandler,
  episodeNotFound,
  episodePageQueryShape,
  episodeSelectionQueryShape,
  listFilterFromQuery,
  sendEpisodePage,
  stepNeedsModel,
} from '../episodes/control-routes.ts';
import { episodeGroupShare } from '../episodes/group-share.ts';
import { sendJson, validate } from '../http/respond.ts';
import type { ModelHost } from '../models/model-host.ts';
import { sumRunSavings } from '../store/episode-list.ts';
import { getEpisode } from '../store/episode-reads.ts';
import type { ControlRouter } from './routes.ts';

const searchQuerySchema = z
  .object({ q: z.string().min(1).max(200), ...episodeSelectionQueryShape, ...episodePageQueryShape })
  .superRefine(stepNeedsModel);

const savingsQuerySchema = z.object({ model: z.string().optional() });

export function addUiRoutes(control: ControlRouter, db: Database, models?: Pick<ModelHost, 'find'>): void {
  control.get('/api/ui/episodes', (_req, res, { url }) => {
    const { q, ...query } = validate(searchQuerySchema, Object.fromEntries(url.searchParams));
    sendEpisodePage(res, db, { ...listFilterFromQuery(query), text: q });
  });
  control.get('/api/ui/savings', (_req, res, { url }) => {
    const { model } = validate(savingsQuerySchema, Object.fromEntries(url.searchParams));
    sendJson(res, 200, sumRunSavings(db, model));
  });
  control.get('/api/ui/episodes/:id/merge', episodeExportHandler(db, models, { lightCalls: true }));
  control.get('/api/ui/episodes/:id/group', (_req, res, { params }) => {
    if (!getEpisode(db, params.id)) throw episodeNotFound(params.id);
    sendJson(res, 200, episodeGroupShare(db, params.id));
  });
}
