/**
 * The runner's only way to the model: the swarm episode API over HTTP (`/swarm/v1`). It never learns where the
 * model lives; the same calls are relayed over p2p when the model is on another peer.
 */
import type { CreateEpisodeRequest, CreateEpisodeResponse, EndEpisodeRequest, SwarmStatusResponse } from '../../common/swarm-api.ts';
import { EpisodeApiError } from './errors.ts';

export type BeginEpisodeRequest = CreateEpisodeRequest;
export type BeganEpisode = CreateEpisodeResponse;
export type { EndEpisodeRequest };

/** A bounded wait per call: an unresponsive peer must not hold an episode slot forever. */
const REQUEST_TIMEOUT_MS = 30_000;

export class EpisodeApi {
  constructor(
    /** e.g. `http://127.0.0.1:8470/swarm/v1` (a function when the port is known only later). */
    private readonly base: string | (() => string),
    /** The bearer credential for a client: a client key (or the control token on the same peer). */
    private readonly credential: (client: string) => string,
  ) {}

  get baseUrl(): string {
    return typeof this.base === 'string' ? this.base : this.base();
  }

  begin(request: BeginEpisodeRequest): Promise<BeganEpisode> {
    return this.call('POST', '/episodes', request.client ?? '', request) as Promise<BeganEpisode>;
  }

  status(client: string): Promise<SwarmStatusResponse> {
    return this.call('GET', '/status', client) as Promise<SwarmStatusResponse>;
  }

  async end(client: string, episodeId: string, result: EndEpisodeRequest): Promise<void> {
    await this.call('POST', `/episodes/${encodeURIComponent(episodeId)}/end`, client, result);
  }

  async abort(client: string, episodeId: string, reason: string): Promise<void> {
    await this.call('POST', `/episodes/${encodeURIComponent(episodeId)}/abort`, client, { reason });
  }

  private async call(method: string, path: string, client: string, body?: unknown): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(this.baseUrl + path, {
        method,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.credential(client)}` },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      throw new EpisodeApiError(`episode API unreachable at ${this.baseUrl}: ${(err as Error).message}`, 0, 'NetworkError');
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      json = {};
    }
    if (!res.ok) {
      const error = (json as { error?: { name?: string; message?: string } }).error;
      throw new EpisodeApiError(
        `${method} ${path} → ${res.status}: ${error?.message ?? text.slice(0, 200)}`,
        res.status,
        error?.name ?? 'HttpError',
      );
    }
    return json;
  }
}
