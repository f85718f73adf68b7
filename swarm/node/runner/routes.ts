/**
 * The runner's control-API routes (all behind the peer's bearer token):
 *   POST   /api/clients                 attach a script (a path on this machine, or uploaded content); dryRun: one episode
 *   GET    /api/clients                 every attached script with its counts and per-task metrics
 *   GET    /api/clients/:name           one of them
 *   GET    /api/clients/:name/runs      its recent runs (outcome, reason, script hash, captured output)
 *   POST   /api/clients/:name/pause     stop starting episodes (in-flight ones finish)
 *   POST   /api/clients/:name/resume
 *   DELETE /api/clients/:name?abort=1   detach (in-flight finish, or are aborted with abort=1)
 *   POST   /api/clients/:name/key       a client key + swarm URL for long-running SDK clients of that name
 */
import type { Router } from '../http/router.ts';
import { HttpError, notFound } from '../http/errors.ts';
import { readJson, sendJson } from '../http/respond.ts';
import {
  ClientNotFoundError,
  EpisodeApiError,
  ModelNotHostedError,
  RewardModuleError,
  RunnerStoppedError,
  ScriptAttachError,
  ScriptSwapRefusedError,
  ScriptSyntaxError,
  TaskSourceError,
} from './errors.ts';
import type { ClientRunner } from './runner.ts';

/** Uploaded scripts come inside the JSON body. */
const ATTACH_BODY_LIMIT = 8 * 1024 * 1024;
const CLIENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Runs per page: the UI shows the recent ones; each carries up to 128 KiB of captured output. */
const RUNS_PAGE_DEFAULT = 100;
const RUNS_PAGE_MAX = 1000;

export interface ClientRouteOptions {
  runner: ClientRunner;
  /** Mints the long-lived key a named SDK client uses on /swarm/v1. */
  mintClientKey: (name: string) => string;
  swarmUrl: () => string;
}

export function addClientRoutes(router: Router, { runner, mintClientKey, swarmUrl }: ClientRouteOptions): void {
  router.post('/api/clients', async (req, res) => {
    const body = await readJson(req, ATTACH_BODY_LIMIT);
    const answer = await guard(() => runner.attachOrDryRun(body as never));
    // A dry run attached nothing: 200 with its run; an attach created (or swapped) a client: 201.
    sendJson(res, 'dryRun' in answer ? 200 : 201, answer);
  });
  router.get('/api/clients', (_req, res) => sendJson(res, 200, { clients: runner.list() }));
  router.get('/api/clients/:name', async (_req, res, { params }) => sendJson(res, 200, await guard(() => runner.get(params.name))));
  router.get('/api/clients/:name/runs', async (_req, res, { params, url }) => {
    const limit = Math.min(RUNS_PAGE_MAX, Math.max(1, Number(url.searchParams.get('limit') ?? RUNS_PAGE_DEFAULT) || RUNS_PAGE_DEFAULT));
    await guard(() => runner.get(params.name));
    sendJson(res, 200, { runs: runner.runs(params.name, limit) });
  });
  router.post('/api/clients/:name/pause', async (_req, res, { params }) => sendJson(res, 200, await guard(() => runner.pause(params.name))));
  router.post('/api/clients/:name/resume', async (_req, res, { params }) => sendJson(res, 200, await guard(() => runner.resume(params.name))));
  router.delete('/api/clients/:name', async (_req, res, { params, url }) => {
    const abortInFlight = ['1', 'true'].includes(url.searchParams.get('abort') ?? '');
    await guard(() => runner.detach(params.name, { abortInFlight }));
    sendJson(res, 200, { detached: params.name });
  });
  router.post('/api/clients/:name/key', (_req, res, { params }) => {
    if (!CLIENT_NAME.test(params.name)) throw new HttpError(400, 'InvalidRequestError', 'client names use letters, digits, dot, dash or underscore', { field: 'name' });
    sendJson(res, 200, { name: params.name, key: mintClientKey(params.name), swarmUrl: swarmUrl() });
  });
}

/** The runner's named errors become HTTP answers that keep their name. */
async function guard<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ClientNotFoundError) throw notFound(err.message, 'client_not_found');
    // The peer is stopping: the request was fine, this peer just will not take it any more.
    if (err instanceof RunnerStoppedError) throw new HttpError(503, err.name, err.message, { code: 'runner_stopped' });
    if (err instanceof ScriptSwapRefusedError) throw new HttpError(409, err.name, err.message, { code: 'swap_refused' });
    if (err instanceof ScriptSyntaxError) throw new HttpError(400, err.name, err.message, { code: 'script_syntax_error' });
    if (err instanceof EpisodeApiError) throw new HttpError(502, err.name, err.message, { code: 'episode_api_error' });
    if (err instanceof TaskSourceError || err instanceof ScriptAttachError || err instanceof RewardModuleError || err instanceof ModelNotHostedError) {
      throw new HttpError(400, err.name, err.message, { code: 'invalid_request' });
    }
    throw err;
  }
}
