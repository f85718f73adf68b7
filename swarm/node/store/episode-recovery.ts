/**
 * What a restarted peer finds in the store about the episodes of the process before it:
 * - rows still `active` belong to episodes whose process died (their keys died with it: nothing can end them), so
 *   they are aborted with a reason (`abortOrphanedEpisodes`, once at peer start, before anything is admitted);
 * - ended train episodes that no step used and nothing marked are the training queue that lived in memory
 *   (`pendingTrainEpisodes`; the training loop rebuilds its batcher from them).
 */
import type { Database } from 'better-sqlite3';
import { statement } from './statements.ts';

/** The abort reason of an episode that was still active when its peer process stopped or died. */
export const PEER_RESTARTED = 'peer_restarted';

/**
 * Aborts every `active` episode (of `model`, when given) with `reason`; returns their ids. Only safe while this
 * process has admitted none: at peer start, before the swarm API listens.
 */
export function abortOrphanedEpisodes(db: Database, options: { model?: string; reason?: string; endedAt?: string } = {}): string[] {
  const reason = options.reason ?? PEER_RESTARTED;
  const endedAt = options.endedAt ?? new Date().toISOString();
  return db.transaction(() => {
    const rows = (
      options.model === undefined
        ? statement(db, "SELECT id FROM episodes WHERE state = 'active' ORDER BY created_at").all()
        : statement(db, "SELECT id FROM episodes WHERE state = 'active' AND model = ? ORDER BY created_at").all(options.model)
    ) as { id: string }[];
    const abort = statement(db, "UPDATE episodes SET state = 'aborted', abort_reason = ?, ended_at = ? WHERE id = ? AND state = 'active'");
    for (const { id } of rows) abort.run(reason, endedAt, id);
    return rows.map((r) => r.id);
  })();
}

export interface PendingTrainEpisode {
  episodeId: string;
  groupId: string;
  reward: number | null;
  /** The policy version the episode was sampled under. */
  policyVersion: number;
}

/**
 * The model's train episodes that ended and were neither trained on nor marked, in the order they ended (so the
 * rebuilt groups are the ones the lost queue held).
 */
export function pendingTrainEpisodes(db: Database, model: string): PendingTrainEpisode[] {
  return statement(
    db,
    `SELECT id AS episodeId, group_id AS groupId, reward, policy_version AS policyVersion FROM episodes
     WHERE model = ? AND kind = 'train' AND state = 'ended' ORDER BY ended_at, rowid`,
  ).all(model) as PendingTrainEpisode[];
}
