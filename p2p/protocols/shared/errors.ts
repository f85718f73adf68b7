/** Errors shared by the request/stream protocols. */

/** The request envelope carried a protocol version this peer does not speak. */
export class UnsupportedVersionError extends Error {
  override name = 'UnsupportedVersionError';
}

/** The request was well-formed JSON but not a valid request for this protocol. */
export class InvalidRequestError extends Error {
  override name = 'InvalidRequestError';
}

/** No handler was registered for this protocol on the remote peer. */
export class NoHandlerError extends Error {
  override name = 'NoHandlerError';
}

/** An emitted frame would exceed the protocol's frame size limit. */
export class ResponseTooLargeError extends Error {
  override name = 'ResponseTooLargeError';
}
