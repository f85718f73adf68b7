/** Presence topic of a swarm: `/agentjet/<swarm>/presence/1`. */
export function presenceTopic(swarmName: string): string {
  return `/agentjet/${swarmName}/presence/1`;
}

export const PRESENCE_VERSION = 1;
/** How often a peer re-announces itself; load changes slowly enough that 5 s keeps schedulers current. */
export const DEFAULT_PRESENCE_INTERVAL_MS = 5_000;
/** A peer silent for three intervals has left (one or two lost messages are tolerated). */
export const PRESENCE_TTL_INTERVALS = 3;
/** An announcement lists models, scripts and load: a few KB. 64 KiB bounds a misbehaving peer. */
export const MAX_PRESENCE_BYTES = 64 * 1024;
/** Collapse bursts of "a peer subscribed" into one announcement. */
export const ANNOUNCE_DEBOUNCE_MS = 50;
/** A clean stop waits at most this long for its goodbye to be sent; shutdown never hangs on a stuck peer. */
export const GOODBYE_TIMEOUT_MS = 500;
/** Goodbyes remembered (per peer, its timestamp) so that a late, older announcement does not bring it back. */
export const REMEMBERED_GOODBYES = 1_024;
