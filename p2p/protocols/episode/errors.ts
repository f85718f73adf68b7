export { NoHandlerError, InvalidRequestError, UnsupportedVersionError, ResponseTooLargeError } from '../shared/errors.ts';

/** The server answered with no response frame. */
export class MissingResponseError extends Error {
  override name = 'MissingResponseError';
}
