/** Errors raised while reading or writing frames. Each has a stable `name` that crosses the wire. */

/** A frame announced a length above the reader's cap. */
export class FrameTooLargeError extends Error {
  override name = 'FrameTooLargeError';
}

/** The stream ended in the middle of a frame, or before the frame the protocol expected. */
export class UnexpectedEndOfStreamError extends Error {
  override name = 'UnexpectedEndOfStreamError';
}

/** No frame arrived before the read's deadline. */
export class ReadTimeoutError extends Error {
  override name = 'ReadTimeoutError';
}

/** A frame was not valid UTF-8 JSON or did not match the protocol's schema. */
export class InvalidFrameError extends Error {
  override name = 'InvalidFrameError';
}

/** The caller (or the remote side) cancelled the exchange. */
export class StreamAbortedError extends Error {
  override name = 'StreamAbortedError';
}

/** An error frame from the remote side, rebuilt with the remote error's name. */
export class RemoteError extends Error {
  constructor(
    readonly remoteName: string,
    message: string,
  ) {
    super(message);
    this.name = remoteName;
  }
}
