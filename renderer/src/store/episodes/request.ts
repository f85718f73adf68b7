/**
 * The data views' door to the control API: one typed request function (method, path, JSON body) with the
 * peer's bearer token, errors rebuilt by name exactly like the shell's client (api/errors.ts).
 * The views receive it from `useDataRequest` and pass it to their loaders; tests pass a fake.
 */
import { PeerUnreachableError, errorFromResponse } from '../../api/errors.ts';

export type HttpMethod = 'GET' | 'POST' | 'DELETE';

export type DataRequest = <T>(
  method: HttpMethod,
  path: string,
  body?: unknown,
  signal?: AbortSignal,
) => Promise<T>;

export interface DataRequestOptions {
  /** Absolute API root, e.g. `http://127.0.0.1:7420/api`. */
  apiUrl: string;
  token: string;
  fetch?: typeof fetch;
}

export function createDataRequest({
  apiUrl,
  token,
  fetch: fetchImpl = fetch,
}: DataRequestOptions): DataRequest {
  const root = apiUrl.replace(/\/+$/, '');
  return async <T>(method: HttpMethod, path: string, body?: unknown, signal?: AbortSignal): Promise<T> => {
    const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response: Response;
    try {
      response = await fetchImpl(`${root}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (cause) {
      if (signal?.aborted) throw cause;
      throw new PeerUnreachableError(`The peer at ${root} did not answer`, { cause });
    }
    if (!response.ok) throw await errorFromResponse(response);
    return (await response.json()) as T;
  };
}

/** `?a=1&b=x` from the defined entries (empty string when none). */
export function queryString(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params))
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** A request's error as one line for the UI: the server's name and message. */
export function describeError(error: unknown): string {
  if (error instanceof Error)
    return error.name && error.name !== 'Error' ? `${error.name}: ${error.message}` : error.message;
  return String(error);
}
