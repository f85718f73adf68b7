import { protocolId } from '../shared/constants.ts';

export const TRAJECTORIES_PROTOCOL_NAME = 'trajectories';
export const TRAJECTORIES_PROTOCOL_VERSION = 1;
export const TRAJECTORIES_PROTOCOL = protocolId(TRAJECTORIES_PROTOCOL_NAME, TRAJECTORIES_PROTOCOL_VERSION);

/** Episode ids per request: a training batch asks for at most a few thousand. */
export const MAX_EPISODE_IDS = 10_000;
export const MAX_EPISODE_ID_CHARS = 128;
/** One record is one episode's trajectory (token ids, logprobs, messages): long agent runs reach MBs. */
export const MAX_TRAJECTORY_RECORD_BYTES = 16 * 1024 * 1024;
/** The request is only ids: MAX_EPISODE_IDS × (MAX_EPISODE_ID_CHARS + quotes and comma). */
export const MAX_TRAJECTORIES_REQUEST_BYTES = MAX_EPISODE_IDS * (MAX_EPISODE_ID_CHARS + 3) + 1024;
export const TRAJECTORIES_READ_TIMEOUT_MS = 60_000;
export const MAX_TRAJECTORIES_INBOUND_STREAMS = 32;
