/**
 * Training runs over the control API (swarm/common/runs-api.ts):
 *
 *   GET   /api/runs?limit=N&offset=K           → { runs: RunSummary[], total } newest first
 *   GET   /api/runs/compare?ids=a,b,…          → RunComparison (2 to MAX_COMPARED_RUNS runs)
 *   GET   /api/runs/:id                        → RunDetail
 *   GET   /api/runs/:id/steps?after=S&limit=N  → { steps: RunStep[] } oldest first, after run step S
 *   GET   /api/runs/:id/steps.csv | steps.jsonl → every step, streamed as a download
 *   GET   /api/runs/:id/evals                  → { evals: RunEvalPoint[] }
 *   GET   /api/runs/:id/tasks?limit=N          → { tasks: RunTaskRow[] }
 *   PATCH /api/runs/:id/config {overrides}     → the settings now in force (only the run a loop trains now)
 */
import type { Database } from 'better-sqlite3';
import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { compareQuerySchema, runIdSchema } from '../../common/runs-api.ts';
import type { ControlRouter } from '../control/routes.ts';
import { HttpError, notFound } from '../http/errors.ts';
import type { Logger } from '../log.ts';
import { readValidated, sendJson, validate } from '../http/respond.ts';
import { iterateRunSteps, listRunSteps, listRuns, runEvals, runTasks, type TrainingRunRow } from '../store/training-runs.ts';
import { TrainingConfigError } from './errors.ts';
import type { TrainingLoop } from './loop.ts';
import { stepsCsv, stepsJsonl } from './run-export.ts';
import { compareRuns, requireRun, RunNotFoundError, runDetail, runSummary } from './run-views.ts';

/** A page of the runs list: the UI virtualises, so one page can hold a sweep's worth. */
const RUNS_PAGE_MAX = 1000;
const RUNS_PAGE_DEFAULT = 200;
const STEPS_PAGE_MAX = 10_000;
const TASKS_MAX = 1000;

const intParam = (name: string, min: number, max: number) =>
  z.coerce
    .number({ error: `${name} must be an integer from ${min} to ${max}` })
    .int(`${name} must be an integer from ${min} to ${max}`)
    .min(min, `${name} must be an integer from ${min} to ${max}`)
    .max(max, `${name} must be an integer from ${min} to ${max}`);

const listQuery = z.object({ limit: intParam('limit', 1, RUNS_PAGE_MAX).default(RUNS_PAGE_DEFAULT), offset: intParam('offset', 0, 1e9).default(0) }).strict();
const stepsQuery = z.object({ after: intParam('after', -1, 1e9).optional(), limit: intParam('limit', 1, STEPS_PAGE_MAX).default(1000) }).strict();
const tasksQuery = z.object({ limit: intParam('limit', 1, TASKS_MAX).default(200) }).strict();
const configBody = z.object({ overrides: z.record(z.string(), z.unknown()) }).strict();

function query(url: URL): Record<string, string> {
  return Object.fromEntries(url.searchParams.entries());
}

export interface RunRoutesOptions {
  db: Database;
  log: Logger;
  /** The loop training a run now, if any (a live configuration change goes to it). */
  loopOfRun: (runId: string) => TrainingLoop | undefined;
}

export function addRunRoutes(control: ControlRouter, { db, log, loopOfRun }: RunRoutesOptions): void {
  const run = (raw: string): TrainingRunRow => {
    const id = validate(runIdSchema, raw);
    try {
      return requireRun(db, id);
    } catch (err) {
      if (err instanceof RunNotFoundError) throw notFound(err.message, 'run_not_found');
      throw err;
    }
  };
  control.get('/api/runs', (_req, res, { url }) => {
    const { limit, offset } = validate(listQuery, query(url));
    const page = listRuns(db, { limit, offset });
    sendJson(res, 200, { runs: page.runs.map((r) => runSummary(db, r)), total: page.total });
  });
  control.get('/api/runs/compare', (_req, res, { url }) => {
    const { ids } = validate(z.object({ ids: compareQuerySchema }).strict(), query(url));
    for (const id of ids) run(id);
    sendJson(res, 200, compareRuns(db, ids));
  });
  control.get('/api/runs/:id', (_req, res, { params }) => sendJson(res, 200, runDetail(db, run(params.id))));
  control.get('/api/runs/:id/steps', (_req, res, { params, url }) => {
    const { after, limit } = validate(stepsQuery, query(url));
    sendJson(res, 200, { steps: listRunSteps(db, run(params.id), { afterRunStep: after, limit }) });
  });
  for (const format of ['csv', 'jsonl'] as const) {
    control.get(`/api/runs/:id/steps.${format}`, async (_req, res, { params }) => {
      const found = run(params.id);
      const lines = format === 'csv' ? stepsCsv(iterateRunSteps(db, found)) : stepsJsonl(iterateRunSteps(db, found));
      await download(res, lines, `${found.id}-steps.${format}`, format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson', log);
    });
  }
  control.get('/api/runs/:id/evals', (_req, res, { params }) => sendJson(res, 200, { evals: runEvals(db, run(params.id)) }));
  control.get('/api/runs/:id/tasks', (_req, res, { params, url }) => {
    const { limit } = validate(tasksQuery, query(url));
    sendJson(res, 200, { tasks: runTasks(db, run(params.id), limit) });
  });
  control.add('PATCH', '/api/runs/:id/config', async (req, res, { params }) => {
    const found = run(params.id);
    const { overrides } = await readValidated(req, configBody);
    const loop = loopOfRun(found.id);
    if (!loop) throw new HttpError(409, 'ConflictError', `run "${found.id}" is not being trained now (${found.status}); only the run a model trains can change its settings`, { code: 'run_not_training' });
    try {
      sendJson(res, 200, { config: loop.updateConfig(overrides) });
    } catch (err) {
      if (err instanceof TrainingConfigError) throw new HttpError(400, err.name, err.message, { field: err.field, code: 'invalid_config' });
      throw err;
    }
  });
}

/** Streams text lines as an attachment; past the headers a failure can only cut the download short. */
async function download(res: ServerResponse, lines: Iterable<string>, filename: string, contentType: string, log: Logger): Promise<void> {
  res.writeHead(200, { 'content-type': contentType, 'content-disposition': `attachment; filename="${filename}"` });
  await pipeline(Readable.from(lines), res).catch((err: unknown) => log.warn('run export cut short', { filename, error: String(err) }));
}
