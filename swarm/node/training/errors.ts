/** Errors raised by the training loop. Each has a stable `name`; tests and clients match on it. */

/**
 * A training configuration override is invalid; `field` names the offending field and `allowed` what it accepts
 * ("at least 2", "from 0 to 1", "one of \"merged\", \"naive\"", the known keys).
 */
export class TrainingConfigError extends Error {
  override name = 'TrainingConfigError';
  constructor(
    message: string,
    readonly field?: string,
    readonly allowed?: string,
  ) {
    super(message);
  }
}

/** A finished episode cannot be turned into training samples (no timelines, no reward …). */
export class EpisodeSamplesError extends Error {
  override name = 'EpisodeSamplesError';
  constructor(
    message: string,
    readonly episodeId: string,
  ) {
    super(message);
  }
}

/** The requested training action does not fit the loop's state (e.g. start after maxSteps was reached). */
export class TrainingStateError extends Error {
  override name = 'TrainingStateError';
}

/** A checkpoint folder is missing its files or its metadata is unreadable. */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}
