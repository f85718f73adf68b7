/**
 * How long to wait before reconnecting. Doubling from one second keeps a restarting peer (a few seconds)
 * reconnected quickly, and the cap keeps a stopped one from being forgotten for minutes.
 */
export const RECONNECT_BASE_MS = 1_000;
export const RECONNECT_MAX_MS = 15_000;

/** Delay before retry number `attempt` (0 = first retry). `jitter` in [0, 1) spreads many tabs apart. */
export function reconnectDelayMs(attempt: number, jitter = 0): number {
  const exponential = RECONNECT_BASE_MS * 2 ** Math.max(0, Math.min(attempt, 16));
  const capped = Math.min(RECONNECT_MAX_MS, exponential);
  return Math.round(capped * (1 + 0.2 * jitter));
}
