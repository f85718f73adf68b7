export { NoHandlerError, InvalidRequestError, UnsupportedVersionError, ResponseTooLargeError } from '../shared/errors.ts';
