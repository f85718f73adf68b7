/**
 * The model-serving service of a peer: hosted models, episodes and the gateway, mounted on the peer's HTTP server.
 *   /v1/...         the OpenAI-compatible gateway (episode keys)
 *   /swarm/v1/...   episodes (control token or client keys)
 *   /api/models     the hosted models (control API)
 * The peer runtime starts it (with no models, it still answers: an empty model list).
 */
import { loadTokenizer } from '../../../worker/node/load-tokenizer.ts';
import type { MergeMode } from '../../common/timeline/merge.ts';
import { ControlRouter } from '../control/routes.ts';
import { EpisodeService } from '../episodes/episode-service.ts';
import { addEpisodeControlRoutes } from '../episodes/control-routes.ts';
import { createSwarmRouter } from '../episodes/routes.ts';
import { createGateway, type Gateway } from '../gateway/gateway.ts';
import type { Router } from '../http/router.ts';
import { sendJson } from '../http/respond.ts';
import type { PeerContext, ServiceHandle } from '../services.ts';
import { clientKeyGeneration } from '../store/client-keys.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { ModelHost, type EngineStarter, type HostedModelSpec, type TokenizerLoader } from './model-host.ts';
import { startWorkerEngine } from './start-engine.ts';

export interface ServingInit {
  models: HostedModelSpec[];
  /** How each model's episodes are merged when they end: the mode its training loop trains with. */
  mergeModeOf?: (model: string) => MergeMode;
  /** Each model's held-out eval interval in steps, as episode starts tell runners (0: once per pass). */
  evalEveryOf?: (model: string) => number;
  /** Tests and benchmarks may start engines another way (e.g. in-process); default: a worker thread each. */
  startEngine?: EngineStarter;
  loadTokenizer?: TokenizerLoader;
}

export interface Serving extends ServiceHandle {
  models: ModelHost;
  episodes: EpisodeService;
  gateway: Gateway;
  /** The local routers, for the swarm's relays to hand what is not remote to. */
  swarmRouter: Router;
  gatewayRouter: Router;
}

export async function startServing(ctx: PeerContext, init: ServingInit): Promise<Serving> {
  const log = ctx.log.child({ service: 'serving' });
  const models = new ModelHost({
    startEngine: init.startEngine ?? startWorkerEngine,
    loadTokenizer: init.loadTokenizer ?? loadTokenizer,
    onError: (model, error) => log.error('model failed to load', { model, error: `${error.name}: ${error.message}` }),
  });
  const episodes = new EpisodeService({
    models,
    db: ctx.db,
    secret: ctx.identity.secret,
    gatewayUrl: () => ctx.urls().gateway,
    log,
    mergeModeOf: init.mergeModeOf,
    evalEveryOf: init.evalEveryOf,
  });
  const gateway = createGateway({ episodes, models, log });
  const swarmRouter = createSwarmRouter({
    episodes,
    models,
    controlToken: ctx.controlToken,
    secret: ctx.identity.secret,
    nodeId: ctx.identity.nodeId,
    generationOf: (client) => clientKeyGeneration(ctx.db, client),
    clientOf: (episodeId) => {
      const episode = getEpisode(ctx.db, episodeId);
      return episode ? (episode.client ?? null) : undefined;
    },
  });

  const routes = new ControlRouter(ctx.controlToken);
  routes.get('/api/models', (_req, res) =>
    sendJson(res, 200, { models: models.models.map((m) => ({ ...m.status(), aliases: [...m.aliases] })) }),
  );
  addEpisodeControlRoutes(routes, ctx.db, models);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      episodes.abortAll('the peer is stopping');
      await models.close();
    })());
  try {
    await models.load(init.models);
  } catch (err) {
    await close();
    throw err;
  }
  for (const model of models.models) {
    log.info('model ready', { model: model.name, state: model.state, backend: model.status().backend, policyVersion: model.policyVersion });
    // A drain is bounded: episodes still out when it times out are aborted, and their agents get 409 on the next call.
    model.onDrainOverdue((episodeIds) => {
      const reason = `drain_timeout: no result within ${model.drainTimeoutS} s while the model waited to update`;
      for (const id of episodeIds) {
        try {
          episodes.abort(id, reason);
        } catch {
          // It ended in the meantime: nothing to abort.
        }
      }
      log.warn('aborted episodes that held an update', { model: model.name, episodes: episodeIds.length });
    });
  }
  return {
    name: 'serving',
    models,
    episodes,
    gateway,
    swarmRouter,
    gatewayRouter: gateway.router,
    routes,
    mounts: [
      // The Messages API answers every error in Anthropic's shape, the server's own refusals included.
      { prefix: '/v1/messages', router: gateway.router, errorShape: 'anthropic' },
      { prefix: '/v1', router: gateway.router, errorShape: 'openai' },
      { prefix: '/swarm', router: swarmRouter, errorShape: 'api' },
    ],
    status: (status) => {
      status.models = models.status();
      status.backend = models.backend();
    },
    close,
  };
}
