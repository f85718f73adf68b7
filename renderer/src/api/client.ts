/**
 * The typed client for the peer's control API (`/api`, bearer token). The renderer talks to the peer through this
 * module only: the connection (status + event stream), every slice's loaders (`request`) and file downloads.
 * Errors are rebuilt by name (errors.ts); a peer that does not answer is a PeerUnreachableError.
 */
import type { StatusPayload } from '../../../swarm/common/api.ts';
import { saveDownload } from './download.ts';
import { PeerUnreachableError, errorFromResponse } from './errors.ts';

export type HttpMethod = 'GET' | 'POST' | 'DELETE';

/** One JSON request: method, path under the API root, optional JSON body. What the slices' loaders are given. */
export type ApiRequest = <T>(method: HttpMethod, path: string, body?: unknown, signal?: AbortSignal) => Promise<T>;

export interface ControlApiClient {
  request: ApiRequest;
  getStatus(signal?: AbortSignal): Promise<StatusPayload>;
  /** Saves a resource as a file (checkpoint archives) under the name the peer gives, else `fallbackName`. */
  download(path: string, fallbackName: string): Promise<void>;
  /** The WebSocket URL of the event stream, token included (browsers cannot set headers on WebSockets). */
  eventsUrl(): string;
}

export interface ControlApiClientOptions {
  /** Absolute URL of the API root, e.g. `http://127.0.0.1:7420/api`. */
  apiUrl: string;
  token: string;
  fetch?: typeof fetch;
}

export function createControlApiClient({ apiUrl, token, fetch: fetchImpl = fetch }: ControlApiClientOptions): ControlApiClient {
  const root = apiUrl.replace(/\/+$/, '');

  async function send(method: HttpMethod, path: string, body: unknown, signal: AbortSignal | undefined): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response: Response;
    try {
      response = await fetchImpl(`${root}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    } catch (cause) {
      if (signal?.aborted) throw cause;
      throw new PeerUnreachableError(`The peer at ${root} did not answer`, { cause });
    }
    if (!response.ok) throw await errorFromResponse(response);
    return response;
  }

  const request: ApiRequest = async <T>(method: HttpMethod, path: string, body?: unknown, signal?: AbortSignal) =>
    (await (await send(method, path, body, signal)).json()) as T;

  return {
    request,
    getStatus: (signal) => request<StatusPayload>('GET', '/status', undefined, signal),
    download: async (path, fallbackName) => saveDownload(await send('GET', path, undefined, undefined), fallbackName),
    eventsUrl() {
      const url = new URL(`${root}/events`);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      url.searchParams.set('token', token);
      return url.toString();
    },
  };
}

/** The API root of the page's own origin: the peer serves the UI and the API on one port. */
export function apiUrlForPage(location: Pick<Location, 'origin'>): string {
  return `${location.origin}/api`;
}

/** `?a=1&b=x` from the defined entries (empty string when none). */
export function queryString(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params))
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}
