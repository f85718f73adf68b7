/**
 * Counts protocol violations (garbage, oversized frames, unknown versions) per remote peer and hangs up on a
 * peer that keeps misbehaving. Shared by every protocol of a node so that a peer cannot spread its garbage
 * over several protocols to stay under the limit.
 */
import type { PeerId } from '@libp2p/interface';

/** Violations tolerated before the peer is disconnected: a single bad frame can be a bug on an honest peer. */
export const DEFAULT_MAX_VIOLATIONS = 3;

/** Violations are forgotten after this long, so that an honest peer with a rare bug is not cut off forever. */
export const VIOLATION_WINDOW_MS = 10 * 60_000;

export interface ViolationTrackerInit {
  maxViolations?: number;
  /** Called once the limit is reached (the node hangs up on the peer). */
  disconnect: (peer: PeerId) => Promise<void>;
  onViolation?: (peer: PeerId, error: Error, count: number) => void;
}

export class ViolationTracker {
  private readonly counts = new Map<string, { count: number; since: number }>();
  private readonly maxViolations: number;

  constructor(private readonly init: ViolationTrackerInit) {
    this.maxViolations = init.maxViolations ?? DEFAULT_MAX_VIOLATIONS;
  }

  /** Record one violation; returns true when the peer was disconnected because of it. */
  record(peer: PeerId, error: Error): boolean {
    const key = peer.toString();
    const now = Date.now();
    const entry = this.counts.get(key);
    const current = entry && now - entry.since < VIOLATION_WINDOW_MS ? entry : { count: 0, since: now };
    current.count += 1;
    this.counts.set(key, current);
    this.init.onViolation?.(peer, error, current.count);
    if (current.count < this.maxViolations) return false;
    this.counts.delete(key);
    this.init.disconnect(peer).catch(() => {});
    return true;
  }

  count(peer: PeerId): number {
    return this.counts.get(peer.toString())?.count ?? 0;
  }
}
