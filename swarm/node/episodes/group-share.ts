/**
 * How much of an episode its GRPO group shares: the tokens of its stored timelines that a prefix tree of the group
 * already holds from the other episodes (a system prompt, tool declarations, the task, identical first turns) —
 * what tree training computes once for the whole group (worker/prefix-tree.ts).
 */
import type { Database } from 'better-sqlite3';
import { treeTokenCount } from '../../../worker/prefix-tree.ts';
import type { EpisodeGroupShare } from '../../common/api.ts';
import { getEpisodeGroup } from '../store/episode-group.ts';
import { getTrainingTimelines } from '../store/timelines.ts';

type TokenLists = { tokens: readonly number[] }[];

/** The share, from the episode's timelines and those of the rest of its group. */
export function groupShareOf(own: TokenLists, others: readonly TokenLists[]): Omit<EpisodeGroupShare, 'groupId' | 'basis'> {
  const rest = others.flat();
  const tokens = own.reduce((a, t) => a + t.tokens.length, 0);
  const restTree = treeTokenCount(rest);
  const groupTreeTokens = treeTokenCount([...rest, ...own]);
  return {
    episodes: others.length + 1,
    tokens,
    // What the episode adds to the group's tree is what it does not share.
    sharedTokens: tokens - (groupTreeTokens - restTree),
    groupMergedTokens: tokens + rest.reduce((a, t) => a + t.tokens.length, 0),
    groupTreeTokens,
  };
}

/** The episode's share of its group; throws EpisodeNotFoundError for an unknown episode. */
export function episodeGroupShare(db: Database, episodeId: string): EpisodeGroupShare {
  const group = getEpisodeGroup(db, episodeId);
  const timelines = (id: string) => getTrainingTimelines(db, id)?.timelines ?? [];
  return { groupId: group.groupId, basis: group.basis, ...groupShareOf(timelines(episodeId), group.others.map(timelines)) };
}
