/**
 * The training service: one TrainingLoop per hosted model, its control-API routes, and its shutdown.
 *
 *   GET  /api/models/:name/training                   → TrainingLoopState
 *   POST /api/models/:name/training {action}          → start | pause | stop; answers the new state
 *   GET  /api/models/:name/steps?after=S&limit=N      → { steps: TrainStepSummary[] } oldest first, after step S
 *   GET  /api/models/:name/checkpoints                → { checkpoints: CheckpointInfo[] } newest first
 *   GET  /api/models/:name/checkpoints/:step/archive  → the checkpoint folder as a tar archive (download)
 *   /api/runs…                                        → the data dir's training runs (run-routes.ts)
 */
import { z } from 'zod';
import type { ModelHost } from '../models/model-host.ts';
import { ControlRouter } from '../control/routes.ts';
import { HttpError, notFound } from '../http/errors.ts';
import { readValidated, sendJson } from '../http/respond.ts';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { CheckpointInfo } from '../../common/api.ts';
import { archiveEntries, tarArchive, tarSize } from './checkpoint-archive.ts';
import type { PeerContext, ServiceHandle } from '../services.ts';
import { checkpointsDir, listCheckpoints } from './checkpoints.ts';
import type { TrainingConfig } from './config.ts';
import { TrainingStateError } from './errors.ts';
import { TrainingLoop } from './loop.ts';
import type { TrainingStore } from './store-port.ts';
import { addRunRoutes } from './run-routes.ts';
import { runSummary } from './run-views.ts';
import { unfinishedRuns, updateRunStatus } from '../store/training-runs.ts';

export const trainingActionSchema = z.object({ action: z.enum(['start', 'pause', 'stop']) }).strict();

/** Steps answered by GET …/steps unless `limit` says otherwise, and the most it may ask for. */
const DEFAULT_STEPS_LIMIT = 1000;
const MAX_STEPS_LIMIT = 10_000;

export interface TrainingServiceOptions {
  host: ModelHost;
  store: TrainingStore;
  /** Each model's resolved settings (config.ts; the runtime resolves them, since serving merges in their mode). */
  configOf: (model: string) => TrainingConfig;
  /** Start every model's loop right away (default true). */
  autoStart?: boolean;
  /** Each model's source as text (a run's identity includes it). */
  sourceOf: (model: string) => string;
  /** `--new-run`: every model starts a new run from its source weights; `--run-name`: what to call it. */
  run?: { fresh?: boolean; name?: string };
}

export class TrainingService implements ServiceHandle {
  readonly name = 'training';
  readonly loops = new Map<string, TrainingLoop>();
  readonly routes: ControlRouter;

  constructor(
    private readonly ctx: PeerContext,
    private readonly options: TrainingServiceOptions,
  ) {
    const { host, store } = options;
    // Runs left running or paused were cut short by a crash; the next start with the same settings continues them.
    for (const run of unfinishedRuns(ctx.db)) updateRunStatus(ctx.db, run.id, 'crashed');
    const trainable = host.models.filter((m) => m.state !== 'failed');
    for (const model of trainable) {
      const name = options.run?.name && trainable.length > 1 ? `${options.run.name}-${model.name}` : options.run?.name;
      const loop = new TrainingLoop({
        model,
        config: options.configOf(model.name),
        source: options.sourceOf(model.name),
        run: { fresh: options.run?.fresh, name },
        runChanged: (run) => ctx.publish({ type: 'run', data: runSummary(ctx.db, run) }),
        store,
        checkpointDir: checkpointsDir(ctx.paths.dataDir, model.name),
        log: ctx.log.child({ component: 'training', model: model.name }),
        publish: (event) => ctx.publish(event),
      });
      this.loops.set(model.name, loop);
    }
    this.routes = new ControlRouter(ctx.controlToken);
    this.addRoutes(this.routes);
    addRunRoutes(this.routes, {
      db: ctx.db,
      log: ctx.log,
      loopOfRun: (runId) => [...this.loops.values()].find((loop) => loop.currentRun()?.id === runId),
    });
  }

  /** Whether the model's loop is collecting episodes and stepping (a mirror never loads weights over those). */
  trainsLocally(model: string): boolean {
    return this.loops.get(model)?.state().status === 'running';
  }

  /** Starts every loop; one whose run already did its maxSteps stays finished (the peer still serves and shows it). */
  async startAll(): Promise<void> {
    for (const loop of this.loops.values()) {
      try {
        await loop.start();
      } catch (err) {
        if (!(err instanceof TrainingStateError)) throw err;
        this.ctx.log.warn('training not started', { model: loop.model.name, reason: err.message });
      }
    }
  }

  /** The loop of a model by name or alias; NotFoundError (404) when there is none. */
  loop(name: string): TrainingLoop {
    const model = this.options.host.find(name);
    const loop = model && this.loops.get(model.name);
    if (!loop) throw notFound(`no trainable model "${name}" is hosted here`, 'model_not_found');
    return loop;
  }

  /** Resolves once every step under way has completed. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.loops.values()].map((loop) => loop.stop()));
  }

  private addRoutes(control: ControlRouter): void {
    control.get('/api/models/:name/training', (_req, res, { params }) => sendJson(res, 200, this.loop(params.name).state()));
    control.post('/api/models/:name/training', async (req, res, { params }) => {
      const loop = this.loop(params.name);
      const { action } = await readValidated(req, trainingActionSchema);
      try {
        if (action === 'start') await loop.start();
        else if (action === 'pause') loop.pause();
        else await loop.stop();
      } catch (err) {
        if (err instanceof TrainingStateError) throw new HttpError(409, err.name, err.message, { code: 'training_state' });
        throw err;
      }
      sendJson(res, 200, loop.state());
    });
    control.get('/api/models/:name/steps', (_req, res, { params, url }) => {
      const loop = this.loop(params.name);
      const limit = parseLimit(url.searchParams.get('limit'));
      const after = url.searchParams.get('after');
      const afterStep = after === null ? undefined : Number(after);
      if (afterStep !== undefined && !Number.isInteger(afterStep)) {
        throw new HttpError(400, 'InvalidRequestError', 'after must be an integer step number', { field: 'after', code: 'invalid_request' });
      }
      sendJson(res, 200, { steps: this.options.store.listSteps(loop.model.name, { afterStep, limit }) });
    });
    control.get('/api/models/:name/checkpoints', (_req, res, { params }) => {
      const checkpoints: CheckpointInfo[] = this.checkpoints(params.name).map(({ dir, meta }) => ({
        step: meta.step,
        policyVersion: meta.policyVersion,
        time: meta.time,
        dir,
        files: meta.files,
      }));
      sendJson(res, 200, { checkpoints });
    });
    control.get('/api/models/:name/checkpoints/:step/archive', async (_req, res, { params }) => {
      const step = Number(params.step);
      if (!Number.isInteger(step) || step < 0) {
        throw new HttpError(400, 'InvalidRequestError', 'step must be a checkpoint\'s step number', { field: 'step', code: 'invalid_request' });
      }
      const model = this.loop(params.name).model.name;
      const checkpoint = this.checkpoints(model).find((c) => c.meta.step === step);
      if (!checkpoint) throw notFound(`model "${model}" has no checkpoint of step ${step}; GET /api/models/${model}/checkpoints lists them`, 'checkpoint_not_found');
      const top = `${model.replace(/[^A-Za-z0-9._-]/g, '_')}-step-${step}`;
      const entries = archiveEntries(checkpoint.dir, top);
      res.writeHead(200, {
        'content-type': 'application/x-tar',
        'content-length': String(tarSize(entries)),
        'content-disposition': `attachment; filename="${top}.tar"`,
      });
      // Headers are out: a failure from here on can only cut the download short (the client sees it incomplete).
      await pipeline(Readable.from(tarArchive(entries)), res).catch((err: unknown) => {
        this.ctx.log.warn('checkpoint download cut short', { model, step, error: String(err) });
      });
    });
  }

  private checkpoints(name: string) {
    return listCheckpoints(checkpointsDir(this.ctx.paths.dataDir, this.loop(name).model.name));
  }
}

function parseLimit(raw: string | null): number {
  if (raw === null) return DEFAULT_STEPS_LIMIT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_STEPS_LIMIT) {
    throw new HttpError(400, 'InvalidRequestError', `limit must be an integer from 1 to ${MAX_STEPS_LIMIT}`, { field: 'limit', code: 'invalid_request' });
  }
  return n;
}

/** Creates the service (routes registered) and, unless told otherwise, starts every model's loop. */
export async function startTrainingService(ctx: PeerContext, options: TrainingServiceOptions): Promise<TrainingService> {
  const service = new TrainingService(ctx, options);
  try {
    if (options.autoStart ?? true) await service.startAll();
  } catch (err) {
    await service.close();
    throw err;
  }
  return service;
}
