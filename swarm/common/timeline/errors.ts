/** Errors raised by the timeline merger and the export builder. Each has a stable `name`. */

/** A call handed to the merger is inconsistent (e.g. logprobs do not line up with the generated ids). */
export class TimelineInputError extends Error {
  override name = 'TimelineInputError';
  constructor(
    message: string,
    readonly callId: string,
  ) {
    super(message);
  }
}
