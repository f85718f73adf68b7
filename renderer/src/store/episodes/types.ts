/** The episode payloads of the control API (swarm/node/episodes/control-routes.ts), in the shared types' terms. */
import type { EpisodeSort } from '../../../../swarm/common/episode-query.ts';
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
  /** The client (runner name or peer id) that ran it, exactly. */
  client: string;
  /** The policy version it began with: digits, or empty for any. */
  policyVersion: string;
  /** Free text over id, task, model, client and script hash (needs the UI search route). */
  query: string;
  sort: EpisodeSort;
}

export type { EpisodeSort };

/** One side of "Compare versions": that task's latest finished episode at one policy version. */
export type CompareSide =
  /** The panel is open, nothing asked yet. */
  | { status: 'idle'; version: number }
  | { status: 'loading'; version: number }
  | { status: 'none'; version: number }
  | { status: 'loaded'; version: number; detail: EpisodeDetail };

export interface EpisodeComparison {
  /** Answers to an older comparison are dropped. */
  request: number;
  taskId: string;
  sides: readonly [CompareSide, CompareSide];
  error: string | null;
}

/** The states whose episodes have their outcome: what a comparison of versions compares. */
export const FINISHED_STATES: readonly EpisodeState[] = ['ended', 'trained', 'discarded'];

export const EPISODE_STATES: readonly EpisodeState[] = ['active', 'ended', 'aborted', 'trained', 'discarded'];
export const EPISODE_KINDS: readonly EpisodeKind[] = ['train', 'eval'];
