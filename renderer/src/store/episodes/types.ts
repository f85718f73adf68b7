/** The episode payloads of the control API (swarm/node/episodes/control-routes.ts), in the shared types' terms. */
import type { CallRecord } from '../../../../swarm/common/timeline/call.ts';
import type { EpisodeKind, EpisodeMeta, EpisodeState } from '../../../../swarm/common/timeline/export.ts';
import type { MergeSavings } from '../../../../swarm/common/timeline/merge.ts';

/** One row of GET /api/episodes. */
export type EpisodeListItem = EpisodeMeta & { calls: number; savings: MergeSavings | null };

/** GET /api/episodes: one page, and how many match all pages together. */
export interface EpisodePage {
  episodes: EpisodeListItem[];
  total: number;
}

/** GET /api/episodes/:id */
export interface EpisodeDetail {
  episode: EpisodeMeta;
  calls: CallRecord[];
}

/** What the list shows; empty strings mean "any". */
export interface EpisodeFilter {
  model: string;
  taskId: string;
  kind: '' | EpisodeKind;
  state: '' | EpisodeState;
  /** Free text over id, task, model, client and script hash (needs the UI search route). */
  query: string;
}

export const EPISODE_STATES: readonly EpisodeState[] = ['active', 'ended', 'aborted', 'trained', 'discarded'];
export const EPISODE_KINDS: readonly EpisodeKind[] = ['train', 'eval'];
