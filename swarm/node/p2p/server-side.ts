/**
 * The server peer's side of the swarm protocols: episodes begun, ended and aborted by client peers run on the
 * local EpisodeService (in process); inference is the local gateway's answer, relayed frame by frame; finished
 * episodes are served as merge-view exports.
 *
 * Inference goes through the local gateway over loopback HTTP: the chat-completions handler is written against
 * Node's req/res (validation, tracker, SSE writer), and going through it keeps remote and local calls identical.
 */
import type { SwarmNode } from '../../../p2p/index.ts';
import { createEpisodeRequestSchema, endEpisodeRequestSchema } from '../../common/swarm-api.ts';
import { episodeHttpError } from '../episodes/http-errors.ts';
import { HttpError } from '../http/errors.ts';
import { validate } from '../http/respond.ts';
import type { Logger } from '../log.ts';
import type { Serving } from '../models/serving.ts';
import { getEpisode, getEpisodeExport } from '../store/episode-reads.ts';
import type { Database } from 'better-sqlite3';
import { EpisodeRpc, InferRelayRequest, type InferFrame } from './wire.ts';

/** Episodes whose client peer is remembered (a few hours of a busy peer). */
const REMEMBERED_OWNERS = 10_000;

export interface ServerSideInit {
  node: SwarmNode;
  serving: Serving;
  db: Database;
  gatewayUrl: () => string;
  log: Logger;
}

export function serveSwarmProtocols(init: ServerSideInit): void {
  const { node, serving, log } = init;
  /** Episode id → the client peer that began it: only that peer may end or abort it. */
  const owners = new Map<string, string>();

  node.episode.handle(async (message, { peerId, signal }) => {
    try {
      const rpc = validate(EpisodeRpc, message);
      if (rpc.type === 'begin') {
        // A train begin beyond the staleness bound waits for it (bounded, well inside the caller's read timeout); a
        // stream closed meanwhile admits nothing.
        const created = await serving.episodes.createWhenAdmitted(validate(createEpisodeRequestSchema, rpc.request), signal);
        owners.set(created.episodeId, peerId);
        // Kept after the episode is over, so late results get the EpisodeService's clear 409; bounded.
        if (owners.size > REMEMBERED_OWNERS) owners.delete(owners.keys().next().value!);
        log.debug('remote episode started', {
          episodeId: created.episodeId,
          peer: peerId,
          model: created.model,
        });
        return { ok: true, result: { ...created } };
      }
      if (owners.get(rpc.episodeId) !== peerId)
        throw new HttpError(404, 'NotFoundError', `no episode ${rpc.episodeId} of peer ${peerId} here`, {
          code: 'episode_not_found',
        });
      const result =
        rpc.type === 'end'
          ? await serving.episodes.end(rpc.episodeId, validate(endEpisodeRequestSchema, rpc.result))
          : serving.episodes.abort(rpc.episodeId, rpc.reason);
      return { ok: true, result: { ...result } };
    } catch (err) {
      const http = episodeHttpError(err);
      if (!(http instanceof HttpError)) throw err;
      return {
        ok: false,
        error: { status: http.status, name: http.name, message: http.message, details: http.details },
      };
    }
  });

  node.infer.handle(async (request, emit, signal) => {
    const { apiKey, body } = InferRelayRequest.parse(request);
    const res = await fetch(`${init.gatewayUrl()}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
    const head: InferFrame = {
      type: 'head',
      status: res.status,
      contentType: res.headers.get('content-type') ?? 'application/json',
      retryAfter: res.headers.get('retry-after'),
    };
    await emit(head);
    if (!res.body) return;
    const decoder = new TextDecoder();
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      if (text) await emit({ type: 'chunk', text } satisfies InferFrame);
    }
  });

  node.trajectories.handle(async (episodeIds, emit) => {
    for (const id of episodeIds) {
      const episode = getEpisode(init.db, id);
      const model = episode && serving.models.find(episode.model);
      if (!model || model.state === 'failed') continue;
      await emit({ id, export: getEpisodeExport(init.db, id, model.tokenizer) });
    }
  });
}
