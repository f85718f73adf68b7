import { protocolId } from '../shared/constants.ts';

export const EPISODE_PROTOCOL_NAME = 'episode';
export const EPISODE_PROTOCOL_VERSION = 1;
export const EPISODE_PROTOCOL = protocolId(EPISODE_PROTOCOL_NAME, EPISODE_PROTOCOL_VERSION);

/** begin/end/abort payloads carry ids, rewards and metadata, never whole trajectories. */
export const MAX_EPISODE_MESSAGE_BYTES = 256 * 1024;
/** The server answers from memory or SQLite; anything slower than this is a dead peer. */
export const EPISODE_READ_TIMEOUT_MS = 30_000;
export const MAX_EPISODE_INBOUND_STREAMS = 128;
