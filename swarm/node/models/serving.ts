/**
 * The model-serving service of a peer: hosted models, episodes and the gateway, mounted on the peer's HTTP server.
 *   /v1/...         the OpenAI-compatible gateway (episode keys)
 *   /swarm/v1/...   episodes (control token or client keys)
 *   /api/models     the hosted models (control API)
 * The peer runtime starts it (with no models, it still answers: an empty model list).
 */
import type { Database } from 'better-sqlite3';
import type { StatusPayload } from '../../common/api.ts';
import { loadTokenizer } from '../../../worker/node/load-tokenizer.ts';
import { EpisodeService } from '../episodes/episode-service.ts';
import { addEpisodeControlRoutes } from '../episodes/control-routes.ts';
import { createSwarmRouter } from '../episodes/routes.ts';
import { createGateway, type Gateway } from '../gateway/gateway.ts';
import type { Mount } from '../http/server.ts';
import { sendJson } from '../http/respond.ts';
import type { Logger } from '../log.ts';
import type { ControlRouter } from '../control/routes.ts';
import { ModelHost, type EngineStarter, type HostedModelSpec, type TokenizerLoader } from './model-host.ts';
import { startWorkerEngine } from './start-engine.ts';

export interface ServingInit {
  models: HostedModelSpec[];
  db: Database;
  log: Logger;
  secret: string;
  nodeId: string;
  controlToken: string;
  gatewayUrl: () => string;
  mounts: Mount[];
  control: ControlRouter;
  addStatusPart: (part: (status: StatusPayload) => void) => void;
  /** Tests and benchmarks may start engines another way (e.g. in-process); default: a worker thread each. */
  startEngine?: EngineStarter;
  loadTokenizer?: TokenizerLoader;
}

export interface Serving {
  models: ModelHost;
  episodes: EpisodeService;
  gateway: Gateway;
  /** Aborts live episodes and stops every engine. */
  close(): Promise<void>;
}

export async function startServing(init: ServingInit): Promise<Serving> {
  const log = init.log.child({ service: 'serving' });
  const models = new ModelHost({
    startEngine: init.startEngine ?? startWorkerEngine,
    loadTokenizer: init.loadTokenizer ?? loadTokenizer,
    onError: (model, error) => log.error('model failed to load', { model, error: `${error.name}: ${error.message}` }),
  });
  const episodes = new EpisodeService({ models, db: init.db, secret: init.secret, gatewayUrl: init.gatewayUrl, log });
  const gateway = createGateway({ episodes, models, log });

  init.mounts.push({ prefix: '/v1', router: gateway.router, errorShape: 'openai' });
  init.mounts.push({
    prefix: '/swarm',
    router: createSwarmRouter({ episodes, models, controlToken: init.controlToken, secret: init.secret, nodeId: init.nodeId }),
    errorShape: 'api',
  });
  init.control.get('/api/models', (_req, res) =>
    sendJson(res, 200, { models: models.models.map((m) => ({ ...m.status(), aliases: [...m.aliases] })) }),
  );
  addEpisodeControlRoutes(init.control, init.db, models);
  init.addStatusPart((status) => {
    status.models = models.status();
    status.backend = models.backend();
  });

  await models.load(init.models);
  for (const model of models.models) {
    log.info('model ready', { model: model.name, state: model.state, backend: model.status().backend, policyVersion: model.policyVersion });
  }
  let closing: Promise<void> | undefined;
  return {
    models,
    episodes,
    gateway,
    close: () =>
      (closing ??= (async () => {
        episodes.abortAll('the peer is stopping');
        await models.close();
      })()),
  };
}
