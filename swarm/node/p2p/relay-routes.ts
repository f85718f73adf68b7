/**
 * The seam between the local HTTP API and remote episodes: routers mounted in front of the local
 * `/swarm/v1/episodes` and `/v1/chat/completions`. Each consults the RemoteEpisodes registry first; anything not
 * remote goes to the local router's own handler, untouched, so the runner and agents cannot tell the difference.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  abortEpisodeRequestSchema,
  createEpisodeRequestSchema,
  endEpisodeRequestSchema,
  type SwarmStatusResponse,
} from '../../common/swarm-api.ts';
import { bearerToken } from '../control/auth.ts';
import { beginAnswering } from '../episodes/routes.ts';
import { clientForNewEpisode, requireOwnEpisode, swarmAuthorizer } from '../episodes/swarm-auth.ts';
import { HttpError, badRequest } from '../http/errors.ts';
import { parseJsonBody, readBody, readValidated, requireJsonContentType, sendJson } from '../http/respond.ts';
import { Router, type RouteContext } from '../http/router.ts';
import type { Mount } from '../http/server.ts';
import type { Logger } from '../log.ts';
import type { Serving } from '../models/serving.ts';
import type { SwarmNode } from '../../../p2p/index.ts';
import { peerGone } from './errors.ts';
import type { AnnouncedModel, RemoteEpisode, RemoteEpisodes } from './remote-episodes.ts';
import { InferFrame } from './wire.ts';

/** Same caps as the local routes (episodes: 1 MiB; the gateway's larger bodies are bounded by the infer protocol). */
const EPISODE_BODY_LIMIT = 1024 * 1024;
const INFER_BODY_LIMIT = 4 * 1024 * 1024 - 1024;

export interface RelayInit {
  node: SwarmNode;
  remote: RemoteEpisodes;
  serving: Serving;
  controlToken: string;
  secret: string;
  nodeId: string;
  /** The client's current key generation (store/client-keys.ts). */
  generationOf: (client: string) => number;
  gatewayUrl: () => string;
  log: Logger;
}

/**
 * The relay mounts. Their prefixes are longer than the local `/swarm` and `/v1`, so the HTTP server (longest prefix
 * wins) asks them first; what is not remote goes to the local router.
 */
export function relayMounts(init: RelayInit): Mount[] {
  const delegate =
    (local: Router) => async (req: IncomingMessage, res: ServerResponse, ctx: RouteContext) => {
      const found = local.match(req.method ?? 'GET', ctx.url.pathname);
      if (typeof found === 'number')
        throw new HttpError(found, 'NotFoundError', `no route ${ctx.url.pathname}`, { code: 'unknown_url' });
      await found.handler(req, res, { url: ctx.url, params: found.params });
    };
  return [
    { prefix: '/swarm/v1/episodes', router: episodesRelay(init, delegate(init.serving.swarmRouter)), errorShape: 'api' },
    { prefix: '/swarm/v1/status', router: statusWithSwarmModels(init), errorShape: 'api' },
    { prefix: '/v1/chat/completions', router: chatRelay(init, delegate(init.serving.gatewayRouter)), errorShape: 'openai' },
  ];
}

/**
 * /swarm/v1/status lists the swarm's models after the local ones (source `swarm:<peerId>`, the least loaded
 * peer's figures), so that the runner's alias check at attach sees a remote model as it would a local one.
 */
function statusWithSwarmModels(init: RelayInit): Router {
  const authorize = swarmAuthorizer(init);
  const router = new Router();
  router.get('/swarm/v1/status', (req, res) => {
    authorize(req);
    const models: SwarmStatusResponse['models'] = init.serving.models.models.map((m) => ({
      ...m.status(),
      aliases: [...m.aliases],
    }));
    for (const name of init.remote.swarmModels()) {
      if (models.some((m) => m.name === name)) continue;
      const peer = init.remote.candidates(name)[0];
      const announced = peer?.announcement.models.find((m) => m.name === name) as AnnouncedModel | undefined;
      if (!peer || !announced) continue;
      models.push({
        name,
        source: `swarm:${peer.peerId}`,
        engineState: announced.state ?? 'idle',
        policyVersion: announced.policyVersion,
        step: announced.step ?? 0,
        backend: null,
        pool: announced.pool ?? { active: 0, limit: 0 },
        aliases: announced.aliases ?? [],
      });
    }
    const status: SwarmStatusResponse = {
      nodeId: init.nodeId,
      models,
      episodes: { active: init.serving.episodes.activeCount },
    };
    sendJson(res, 200, status);
  });
  return router;
}

function episodesRelay(
  init: RelayInit,
  localHandler: (req: IncomingMessage, res: ServerResponse, ctx: RouteContext) => Promise<void>,
): Router {
  const authorize = swarmAuthorizer(init);
  const router = new Router();
  router.post('/swarm/v1/episodes', async (req, res) => {
    const caller = authorize(req);
    const body = await readValidated(req, createEpisodeRequestSchema, EPISODE_BODY_LIMIT);
    const client = clientForNewEpisode(caller, body.client);
    if (init.serving.models.find(body.model)) return beginAnswering(res, init.serving.episodes, { ...body, client });
    const episode = await init.remote.begin({ ...body, client });
    sendJson(res, 201, {
      episodeId: episode.episodeId,
      baseUrl: init.gatewayUrl(),
      apiKey: episode.apiKey,
      model: episode.model,
      policyVersion: episode.policyVersion,
    });
  });
  router.post('/swarm/v1/episodes/:id/:action', async (req, res, ctx) => {
    const episode = init.remote.findById(ctx.params.id);
    if (!episode || (ctx.params.action !== 'end' && ctx.params.action !== 'abort'))
      return localHandler(req, res, ctx);
    requireOwnEpisode(authorize(req), episode.episodeId, episode.client);
    if (ctx.params.action === 'end') {
      const body = await readValidated(req, endEpisodeRequestSchema, EPISODE_BODY_LIMIT);
      sendJson(res, 200, await init.remote.end(episode, { ...body }));
    } else {
      const body = await readValidated(req, abortEpisodeRequestSchema, EPISODE_BODY_LIMIT);
      sendJson(res, 200, await init.remote.abort(episode, body.reason));
    }
  });
  return router;
}

function chatRelay(
  init: RelayInit,
  localHandler: (req: IncomingMessage, res: ServerResponse, ctx: RouteContext) => Promise<void>,
): Router {
  const router = new Router();
  router.post('/v1/chat/completions', async (req, res, ctx) => {
    const key = bearerToken(req);
    const episode = key ? init.remote.findByKey(key) : undefined;
    if (!episode) return localHandler(req, res, ctx);
    requireJsonContentType(req);
    const body = parseObject(await readBody(req, INFER_BODY_LIMIT));
    // A server peer that dropped a moment ago is waited for (its grace period); a gone one is PeerGoneError.
    await init.remote.reachable(episode);
    await relayCompletion(init, episode, body, req, res);
  });
  return router;
}

/**
 * Streams the server peer's gateway answer into `res` as it arrives (SSE or one JSON body alike). A call that fails
 * before any of the answer went out waits out the server's grace period and is sent once more if it is back.
 */
async function relayCompletion(
  init: RelayInit,
  episode: RemoteEpisode,
  body: Record<string, unknown>,
  req: IncomingMessage,
  res: ServerResponse,
  retried = false,
): Promise<void> {
  const cancel = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) cancel.abort();
  };
  res.on('close', onClose);
  req.on('aborted', onClose);
  try {
    for await (const raw of init.node.infer.request(
      episode.peerId,
      { apiKey: episode.apiKey, body },
      { signal: cancel.signal },
    )) {
      const frame = InferFrame.parse(raw);
      if (frame.type === 'head') {
        res.writeHead(frame.status, {
          'content-type': frame.contentType,
          ...(frame.retryAfter ? { 'retry-after': frame.retryAfter } : {}),
        });
        res.flushHeaders();
      } else if (!res.destroyed) {
        res.write(frame.text);
      }
    }
    if (!res.destroyed) res.end();
  } catch (err) {
    if (cancel.signal.aborted) return;
    if (!retried && !res.headersSent && (await init.remote.recovered(episode))) {
      return relayCompletion(init, episode, body, req, res, true);
    }
    init.remote.markGone(episode, `inference failed: ${(err as Error).name}`);
    const error = peerGone(episode.episodeId, episode.peerId, episode.gone!);
    init.log.warn('relayed call failed', {
      episodeId: episode.episodeId,
      peer: episode.peerId,
      error: String(err),
    });
    if (!res.headersSent) throw error;
    // A stream already started: say so in-band, as the local gateway does.
    if (!res.destroyed)
      res.end(
        `data: ${JSON.stringify({ error: { message: error.message, type: 'server_error', param: null, code: 'peer_gone' } })}\n\n`,
      );
    // Best effort: the server may still be there (a dropped stream); the episode is over either way.
    init.remote.abortQuietly(episode, 'relay to the server peer failed');
  } finally {
    res.off('close', onClose);
  }
}

function parseObject(raw: Buffer): Record<string, unknown> {
  const value = parseJsonBody(raw);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw badRequest('request body must be a JSON object');
  return value as Record<string, unknown>;
}
