/**
 * The GRPO group an episode trains with: the episodes of its model and group that one step trained together, or,
 * before its step, those of its group that are ended and waiting in the queue with it. The merge view reads it to
 * show how much of an episode its group shares (episodes/group-share.ts).
 */
import type { Database } from 'better-sqlite3';
import { EpisodeNotFoundError } from './episode-errors.ts';
import { statement } from './statements.ts';

/** A queue holds a handful of groups; a group's repeats beyond this are not one step's batch anyway. */
const MAX_GROUP_EPISODES = 64;

export interface EpisodeGroup {
  groupId: string;
  /** `step`: trained together in one step; `queued`: ended and waiting for a step together; `alone`: neither. */
  basis: 'step' | 'queued' | 'alone';
  /** The other episodes of the group (this one excluded), oldest first. */
  others: string[];
}

export function getEpisodeGroup(db: Database, episodeId: string): EpisodeGroup {
  const episode = statement(db, 'SELECT model, group_id, state, kind FROM episodes WHERE id = ?').get(episodeId) as { model: string; group_id: string; state: string; kind: string } | undefined;
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  const ids = (rows: unknown[]) => (rows as { id: string }[]).map((r) => r.id);
  if (episode.state === 'trained') {
    const others = ids(
      statement(
        db,
        `SELECT e.id FROM train_step_episodes mine
           JOIN train_step_episodes t ON t.model = mine.model AND t.step = mine.step AND t.episode_id <> mine.episode_id
           JOIN episodes e ON e.id = t.episode_id AND e.group_id = @groupId
         WHERE mine.episode_id = @episodeId
         ORDER BY e.created_at LIMIT @limit`,
      ).all({ episodeId, groupId: episode.group_id, limit: MAX_GROUP_EPISODES }),
    );
    return { groupId: episode.group_id, basis: others.length > 0 ? 'step' : 'alone', others };
  }
  if (episode.state !== 'ended') return { groupId: episode.group_id, basis: 'alone', others: [] };
  const others = ids(
    statement(
      db,
      `SELECT id FROM episodes
       WHERE model = @model AND group_id = @groupId AND state = 'ended' AND kind = @kind AND id <> @episodeId
       ORDER BY created_at LIMIT @limit`,
    ).all({ model: episode.model, groupId: episode.group_id, kind: episode.kind, episodeId, limit: MAX_GROUP_EPISODES }),
  );
  return { groupId: episode.group_id, basis: others.length > 0 ? 'queued' : 'alone', others };
}
