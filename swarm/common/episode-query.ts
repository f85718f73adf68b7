/**
 * The orders an episode list can come in: shared by the control API (swarm/node/episodes/control-routes.ts), the
 * CLI (`agentjet episodes list --sort`) and the UI's list (renderer/src/store/episodes).
 *   newest / oldest          by creation time (then id)
 *   reward-desc / reward-asc by reward, episodes without one (active, aborted) last; equal rewards newest first in
 *                            reward-desc, oldest first in reward-asc (the exact reverse)
 */
import { z } from 'zod';

export const EPISODE_SORTS = ['newest', 'oldest', 'reward-desc', 'reward-asc'] as const;
export const episodeSortSchema = z.enum(EPISODE_SORTS);
export type EpisodeSort = z.infer<typeof episodeSortSchema>;
export const DEFAULT_EPISODE_SORT: EpisodeSort = 'newest';
