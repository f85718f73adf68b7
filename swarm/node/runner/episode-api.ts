/**
 * The runner's only way to the model: the swarm episode API over HTTP (`/swarm/v1`). It never learns where the
 * model lives; the same calls are relayed over p2p when the model is on another peer. Answers are validated
 * (zod) before the runner uses them; errors keep the remote's status, error name and Retry-After.
 */
import { z } from 'zod';
import type { CreateEpisodeRequest, CreateEpisodeResponse, EndEpisodeRequest } from '../../common/swarm-api.ts';
import { EpisodeApiError } from './errors.ts';

export type BeginEpisodeRequest = CreateEpisodeRequest;
export type BeganEpisode = CreateEpisodeResponse;
export type { EndEpisodeRequest };

/** A bounded wait per call: an unresponsive peer must not hold an episode slot forever. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Of an error body, enough for the message; the rest is dropped. */
const ERROR_TEXT_CHARS = 200;

const beganEpisodeSchema = z.object({
  episodeId: z.string().min(1),
  baseUrl: z.string().min(1),
  apiKey: z.string().min(1),
  model: z.string().min(1),
  policyVersion: z.number(),
  step: z.number().int().nonnegative().optional(),
  evalEvery: z.number().int().nonnegative().optional(),
});

/** The part of `GET /swarm/v1/status` the runner reads: which names each model answers to. */
const swarmModelsSchema = z.looseObject({
  models: z.array(z.looseObject({ name: z.string(), aliases: z.array(z.string()) })),
});
export type SwarmModels = z.infer<typeof swarmModelsSchema>;

const errorBodySchema = z.looseObject({ error: z.looseObject({ name: z.string().optional(), message: z.string().optional() }) });

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

  async begin(request: BeginEpisodeRequest): Promise<BeganEpisode> {
    return this.parsed('POST /episodes', beganEpisodeSchema, await this.call('POST', '/episodes', request.client ?? '', request));
  }

  async status(client: string): Promise<SwarmModels> {
    return this.parsed('GET /status', swarmModelsSchema, await this.call('GET', '/status', client));
  }

  async end(client: string, episodeId: string, result: EndEpisodeRequest): Promise<void> {
    await this.call('POST', `/episodes/${encodeURIComponent(episodeId)}/end`, client, result);
  }

  async abort(client: string, episodeId: string, reason: string): Promise<void> {
    await this.call('POST', `/episodes/${encodeURIComponent(episodeId)}/abort`, client, { reason });
  }

  private parsed<T>(what: string, schema: z.ZodType<T>, value: unknown): T {
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw new EpisodeApiError(`${what} answered an unexpected body: ${parsed.error.issues[0].message}`, 200, 'InvalidResponseError');
    return parsed.data;
  }

  private async call(method: string, path: string, client: string, body?: unknown): Promise<unknown> {
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.baseUrl + path, {
        method,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.credential(client)}` },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      text = await res.text();
    } catch (err) {
      // Refused, reset or timed out, before or while the answer came: the same to the runner (retry later).
      throw new EpisodeApiError(`episode API unreachable at ${this.baseUrl}: ${(err as Error).message}`, 0, 'NetworkError');
    }
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      json = {};
    }
    if (!res.ok) {
      const error = errorBodySchema.safeParse(json);
      const remote = error.success ? error.data.error : undefined;
      throw new EpisodeApiError(
        `${method} ${path} → ${res.status}: ${remote?.message ?? text.slice(0, ERROR_TEXT_CHARS)}`,
        res.status,
        remote?.name ?? 'HttpError',
        retryAfterMs(res.headers.get('retry-after')),
      );
    }
    return json;
  }
}

/** Retry-After as seconds or an HTTP date (RFC 9110 §10.2.3), in ms from now; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  const value = header?.trim() ?? '';
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // An HTTP date names its day and month ("Wed, 21 Oct 2015 07:28:00 GMT"); Date.parse alone takes "-3" as a year.
  if (!/^[A-Za-z]{3}, /.test(value)) return null;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
