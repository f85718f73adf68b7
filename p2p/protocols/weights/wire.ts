/** Frames of `/agentjet/weights/1`. */
import { z } from 'zod';
import { CHUNKS_PER_REQUEST, MAX_CHUNKS } from './constants.ts';
import { SignedManifest } from './manifest.ts';

const BlobId = { model: z.string().min(1).max(256), version: z.number().int().nonnegative() };

const ChunksRequest = {
  ...BlobId,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  indices: z.array(z.number().int().nonnegative().max(MAX_CHUNKS - 1)).min(1).max(CHUNKS_PER_REQUEST * 4),
};

export const WeightsRequest = z.discriminatedUnion('op', [
  z.object({ op: z.literal('manifest'), ...BlobId }),
  z.object({ op: z.literal('chunks'), ...ChunksRequest }),
  /** The same chunks, over a one-time direct channel (direct.ts) that the answer offers. */
  z.object({ op: z.literal('direct'), ...ChunksRequest }),
]);
export type WeightsRequest = z.infer<typeof WeightsRequest>;

/** JSON frames of a response. A `chunk` frame is followed by one binary frame of exactly `bytes` bytes. */
export const WeightsResponseFrame = z.discriminatedUnion('t', [
  z.object({ t: z.literal('manifest'), signed: SignedManifest }),
  z.object({ t: z.literal('chunk'), index: z.number().int().nonnegative(), bytes: z.number().int().nonnegative() }),
  z.object({ t: z.literal('direct'), port: z.number().int().min(1).max(65_535), key: z.string().max(64) }),
  z.object({ t: z.literal('end') }),
  z.object({ t: z.literal('error'), name: z.string().max(200), message: z.string().max(4_000) }),
]);
export type WeightsResponseFrame = z.infer<typeof WeightsResponseFrame>;
