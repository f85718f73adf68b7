export { NoHandlerError, InvalidRequestError, UnsupportedVersionError, ResponseTooLargeError } from '../shared/errors.ts';

/** A record from the remote had no string `id` or an id that was not asked for. */
export class InvalidTrajectoryRecordError extends Error {
  override name = 'InvalidTrajectoryRecordError';
}
