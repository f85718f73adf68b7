import { protocolId } from '../shared/constants.ts';

export const INFER_PROTOCOL_NAME = 'infer';
export const INFER_PROTOCOL_VERSION = 1;
export const INFER_PROTOCOL = protocolId(INFER_PROTOCOL_NAME, INFER_PROTOCOL_VERSION);

/** An OpenAI chat request with a long agent context is a few hundred KB; 4 MiB leaves room without inviting abuse. */
export const MAX_INFER_REQUEST_BYTES = 4 * 1024 * 1024;
/** One streamed frame is a token delta or a final non-streamed response. */
export const MAX_INFER_FRAME_BYTES = 1024 * 1024;
/** A loaded CPU server can take a while to the first token; longer silence means it is gone. */
export const INFER_READ_TIMEOUT_MS = 120_000;
/** Concurrent inference streams one peer serves; the model's batcher queues beyond this. */
export const MAX_INFER_INBOUND_STREAMS = 256;
