/** The episode store's errors: named, so that callers and tests (and HTTP answers) tell them apart by `name`. */
import type { EpisodeState } from '../../common/timeline/export.ts';

export class EpisodeNotFoundError extends Error {
  override name = 'EpisodeNotFoundError';
  constructor(readonly episodeId: string) {
    super(`episode ${episodeId} does not exist`);
  }
}

export class EpisodeExistsError extends Error {
  override name = 'EpisodeExistsError';
  constructor(readonly episodeId: string) {
    super(`episode ${episodeId} already exists`);
  }
}

/** The episode is not in a state that allows the change (e.g. ending an aborted episode). */
export class EpisodeStateError extends Error {
  override name = 'EpisodeStateError';
  constructor(
    readonly episodeId: string,
    readonly state: EpisodeState,
    message: string,
  ) {
    super(message);
  }
}

/** A list query out of bounds (page size, offset). */
export class EpisodeQueryError extends Error {
  override name = 'EpisodeQueryError';
}
