/**
 * Errors of the control-API client. Server errors arrive as `{error:{name, message, field?}}` and are rebuilt
 * with the server's `name`, so callers branch on `name` or `status`, never on message text.
 */
import type { ApiErrorBody } from '../../../swarm/common/api.ts';

export class ControlApiError extends Error {
  readonly status: number;
  readonly field: string | undefined;

  constructor(name: string, message: string, status: number, field?: string) {
    super(message);
    this.name = name;
    this.status = status;
    this.field = field;
  }

  /** 401/403: the token is missing, wrong, or belongs to another peer. */
  get isUnauthorised(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

/** The peer could not be reached at all (not running, wrong port, network down). */
export class PeerUnreachableError extends Error {
  override readonly name = 'PeerUnreachableError';
}

/** Rebuild the error a failed response carries; bodies that are not in the API's shape still give a named error. */
export async function errorFromResponse(response: Response): Promise<ControlApiError> {
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // not JSON (a proxy's error page, an empty 401): fall through to the generic error
  }
  if (isApiErrorBody(body)) {
    const { name, message, field } = body.error;
    return new ControlApiError(name, message, response.status, field);
  }
  const name = response.status === 401 ? 'UnauthorisedError' : 'HttpError';
  return new ControlApiError(name, `HTTP ${response.status} ${response.statusText}`.trim(), response.status);
}

function isApiErrorBody(body: unknown): body is ApiErrorBody {
  if (typeof body !== 'object' || body === null || !('error' in body)) return false;
  const error = (body as { error: unknown }).error;
  return typeof error === 'object' && error !== null && typeof (error as { name?: unknown }).name === 'string';
}

/** A request's error as one line for the UI: the server's name and message. */
export function describeError(error: unknown): string {
  if (error instanceof Error)
    return error.name && error.name !== 'Error' ? `${error.name}: ${error.message}` : error.message;
  return String(error);
}
