/**
 * Errors that become HTTP answers. `name` is stable (clients and tests match on it); the message says what was
 * wrong and how to fix it. The error handler renders them in the control API's shape or in OpenAI's shape.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    override readonly name: string,
    message: string,
    readonly details: { field?: string; code?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string, field?: string) =>
  new HttpError(400, 'InvalidRequestError', message, { field, code: 'invalid_request' });
export const unauthorized = (message: string) =>
  new HttpError(401, 'AuthenticationError', message, { code: 'invalid_api_key' });
export const notFound = (message: string, code = 'not_found') => new HttpError(404, 'NotFoundError', message, { code });
export const conflict = (message: string, code = 'conflict') => new HttpError(409, 'ConflictError', message, { code });
export const payloadTooLarge = (limit: number) =>
  new HttpError(413, 'PayloadTooLargeError', `request body exceeds ${limit} bytes`, { code: 'request_too_large' });
export const unavailable = (message: string, retryAfterS: number, code = 'unavailable') =>
  new HttpError(503, 'ServiceUnavailableError', message, { code, headers: { 'Retry-After': String(retryAfterS) } });
export const unsupportedMediaType = (given: string) =>
  new HttpError(
    415,
    'UnsupportedMediaTypeError',
    `request body is sent as "${given}"; send JSON with Content-Type: application/json`,
    { code: 'unsupported_media_type' },
  );
/** The disk holding the peer's data is full: nothing was stored, and retrying after freeing space works. */
export const insufficientStorage = (what: string) =>
  new HttpError(
    507,
    'InsufficientStorageError',
    `${what}: the disk holding the peer's data directory is full; nothing was stored. Free some space (old checkpoints in <data>/checkpoints, logs in <data>/logs) and retry`,
    { code: 'insufficient_storage' },
  );
