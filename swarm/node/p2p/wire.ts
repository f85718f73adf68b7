/**
 * What the swarm runtime puts inside p2p's generic protocols (p2p only carries JSON objects):
 * episode RPC messages and answers, infer request and frames, trajectory records. Validated with zod on arrival.
 */
import { z } from 'zod';

export const EpisodeRpc = z.discriminatedUnion('type', [
  z.object({ type: z.literal('begin'), request: z.record(z.string(), z.unknown()) }),
  z.object({
    type: z.literal('end'),
    episodeId: z.string().min(1).max(128),
    result: z.record(z.string(), z.unknown()),
  }),
  z.object({
    type: z.literal('abort'),
    episodeId: z.string().min(1).max(128),
    reason: z.string().min(1).max(2000),
  }),
]);
export type EpisodeRpc = z.infer<typeof EpisodeRpc>;

/** An HTTP error flattened to cross the wire and be rebuilt with the same status and name. */
export const WireHttpError = z.object({
  status: z.number().int().min(400).max(599),
  name: z.string().max(128),
  message: z.string().max(4096),
  details: z.object({
    field: z.string().optional(),
    code: z.string().optional(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
});

export const EpisodeRpcAnswer = z.union([
  z.object({ ok: z.literal(true), result: z.record(z.string(), z.unknown()) }),
  z.object({ ok: z.literal(false), error: WireHttpError }),
]);

export const InferRelayRequest = z.object({
  apiKey: z.string().min(1).max(512),
  body: z.record(z.string(), z.unknown()),
});

/** The gateway's answer, relayed: the head first, then the body text as it arrives. */
export const InferFrame = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('head'),
    status: z.number().int(),
    contentType: z.string().max(256),
    retryAfter: z.string().max(32).nullable(),
  }),
  z.object({ type: z.literal('chunk'), text: z.string() }),
]);
export type InferFrame = z.infer<typeof InferFrame>;
