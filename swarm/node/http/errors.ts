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
