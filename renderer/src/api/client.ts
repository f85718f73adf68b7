/**
 * A small typed client for the peer's control API (`/api`, bearer token). The renderer talks to the peer
 * through this module only.
 */
import type { StatusPayload } from '../../../swarm/common/api.ts';
import { PeerUnreachableError, errorFromResponse } from './errors.ts';

export interface ControlApiClient {
  getStatus(signal?: AbortSignal): Promise<StatusPayload>;
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

  async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
    let response: Response;
    try {
      response = await fetchImpl(`${root}${path}`, { headers: { Authorization: `Bearer ${token}` }, signal });
    } catch (cause) {
      if (signal?.aborted) throw cause;
      throw new PeerUnreachableError(`The peer at ${root} did not answer`, { cause });
    }
    if (!response.ok) throw await errorFromResponse(response);
    return (await response.json()) as T;
  }

  return {
    getStatus: (signal) => getJson<StatusPayload>('/status', signal),
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
