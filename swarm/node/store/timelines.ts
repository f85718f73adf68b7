/**
 * What training reads of an ended episode: the timelines stored at its `end` (merged once, in the mode its model
 * trains with; store/episodes.ts `endEpisode` writes them), their token arrays only, with the naive token count
 * and the episode's own success flag. Nothing is merged here: the stored timelines are the ones trained on.
 */
import type { Database } from 'better-sqlite3';
import type { MergeMode, MergeSavings } from '../../common/timeline/merge.ts';
import { decodeFloat32, decodeInt32, decodeMask } from './blobs.ts';
import { EpisodeNotFoundError } from './episode-errors.ts';
import { statement } from './statements.ts';

export interface TrainingTimeline {
  timelineId: string;
  tokens: number[];
  /** 1 at generated positions (trained on), 0 at prompt positions. */
  lossMask: number[];
  /** The sampler's logprobs at generated positions, 0 elsewhere. */
  logprobs: number[];
}

export interface TrainingTimelines {
  /** The mode the timelines were merged in at `end`. */
  mode: MergeMode;
  /** In stored order (the order the merger made them). */
  timelines: TrainingTimeline[];
  /** Σ (prompt + generated) over the episode's calls: what one sample per call processes. */
  naiveTokens: number;
  /** What the agent or grader reported at `end` (null when it said nothing). */
  success: boolean | null;
}

/**
 * The episode's stored timelines as training takes them; null when none were stored (it never ended).
 * Throws EpisodeNotFoundError for an unknown episode.
 */
export function getTrainingTimelines(db: Database, episodeId: string): TrainingTimelines | null {
  const episode = statement(db, 'SELECT merge_mode, merge_savings, success FROM episodes WHERE id = ?').get(
    episodeId,
  ) as { merge_mode: MergeMode | null; merge_savings: string | null; success: number | null } | undefined;
  if (!episode) throw new EpisodeNotFoundError(episodeId);
  if (episode.merge_mode === null || episode.merge_savings === null) return null;
  const rows = statement(
    db,
    'SELECT timeline_id, tokens, loss_mask, logprobs FROM timelines WHERE episode_id = ? ORDER BY idx',
  ).all(episodeId) as {
    timeline_id: string;
    tokens: Buffer;
    loss_mask: Buffer;
    logprobs: Buffer;
  }[];
  return {
    mode: episode.merge_mode,
    timelines: rows.map((row) => ({
      timelineId: row.timeline_id,
      tokens: decodeInt32(row.tokens),
      lossMask: decodeMask(row.loss_mask),
      logprobs: decodeFloat32(row.logprobs),
    })),
    naiveTokens: (JSON.parse(episode.merge_savings) as MergeSavings).naiveTokens,
    success: episode.success === null ? null : episode.success === 1,
  };
}
