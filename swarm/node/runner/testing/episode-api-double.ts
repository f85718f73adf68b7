/**
 * TEST DOUBLE of the swarm episode API (`/swarm/v1`), over real HTTP on loopback, for what the real routes cannot
 * be made to do on demand: refuse starts (503 with Retry-After, 429 pool full) and drop connections. Everything
 * else answers as the real routes do (episode-api-double.contract.test.ts sends both the same requests and
 * compares status codes and error names): create 201, end/abort 200, a late end or abort 409 ConflictError, an
 * unknown episode 404, an unknown model 404, a bad body 400 InvalidRequestError, a wrong token 401.
 * It hosts no model: there is no chat endpoint, so runner tests that need the model use the real routes
 * (testing/episode-server.ts).
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { abortEpisodeRequestSchema, createEpisodeRequestSchema, endEpisodeRequestSchema } from '../../../common/swarm-api.ts';
import { listen } from '../../http/server.ts';

export interface DoubleEpisode {
  id: string;
  model: string;
  taskId: string;
  kind: 'train' | 'eval';
  client?: string;
  scriptHash?: string;
  teamId?: string;
  state: 'active' | 'ended' | 'aborted';
  reward?: number;
  reason?: string;
}

/** One `POST /episodes` as the double saw it: when, and what it answered (0: it dropped the connection). */
export interface DoubleBegin {
  at: number;
  status: number;
}

/** A failure to inject into the next begins. */
export type BeginFailure =
  | { kind: 'busy'; status: 503 | 429; retryAfterS?: number }
  /** Close the connection without answering. */
  | { kind: 'drop' };

/** What the real routes answer while a model drains or updates (episodes/http-errors.ts RETRY_AFTER_S). */
const DEFAULT_RETRY_AFTER_S = 5;

export class EpisodeApiDouble {
  readonly token = randomBytes(12).toString('hex');
  readonly episodes = new Map<string, DoubleEpisode>();
  /** Every begin, in arrival order. */
  readonly begins: DoubleBegin[] = [];
  /** Emits `begin` (DoubleBegin) after each begin was answered. */
  readonly events = new EventEmitter<{ begin: [DoubleBegin] }>();
  private failures: { failure: BeginFailure; count: number }[] = [];
  private server!: Server;
  url = '';

  /** The models the double "hosts", each with the aliases its host answers to. */
  constructor(readonly models: { name: string; aliases: string[] }[] = [{ name: 'tiny', aliases: ['gpt-4o-mini'] }]) {}

  static async start(models?: { name: string; aliases: string[] }[]): Promise<EpisodeApiDouble> {
    const double = new EpisodeApiDouble(models);
    double.server = createServer((req, res) => void double.handle(req, res).catch((err) => send(res, 500, { error: { name: 'InternalError', message: String(err) } })));
    const port = await listen(double.server, 0, '127.0.0.1');
    double.url = `http://127.0.0.1:${port}`;
    return double;
  }

  get swarmUrl(): string {
    return `${this.url}/swarm/v1`;
  }

  /** Episodes whose server peer is "gone": their end and abort answer 502 PeerGoneError, as the relay does. */
  readonly serverGone = new Set<string>();

  /** The next `count` begins fail so. */
  failBegins(count: number, failure: BeginFailure): void {
    this.failures.push({ failure, count });
  }

  list(filter: Partial<Pick<DoubleEpisode, 'client' | 'state' | 'teamId'>> = {}): DoubleEpisode[] {
    return [...this.episodes.values()].filter((e) => Object.entries(filter).every(([k, v]) => e[k as keyof DoubleEpisode] === v));
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://x');
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (bearer !== this.token) return send(res, 401, { error: { name: 'AuthenticationError', message: 'wrong token' } });
    if (req.method === 'GET' && url.pathname === '/swarm/v1/status') {
      return send(res, 200, { nodeId: 'double', models: this.models.map((m) => ({ ...m, engineState: 'rolling', policyVersion: 0 })), episodes: { active: this.list({ state: 'active' }).length } });
    }
    if (req.method === 'POST' && url.pathname === '/swarm/v1/episodes') return this.begin(req, res, body);
    const m = /^\/swarm\/v1\/episodes\/([^/]+)\/(end|abort)$/.exec(url.pathname);
    if (req.method === 'POST' && m) {
      const action = m[2] as 'end' | 'abort';
      const parsed = action === 'end' ? endEpisodeRequestSchema.safeParse(body) : abortEpisodeRequestSchema.safeParse(body);
      if (!parsed.success) return send(res, 400, { error: { name: 'InvalidRequestError', message: parsed.error.issues[0].message } });
      const episode = this.episodes.get(decodeURIComponent(m[1]));
      if (!episode) return send(res, 404, { error: { name: 'NotFoundError', message: 'no such episode' } });
      // What the swarm's relay answers once an episode's server peer is gone (p2p/errors.ts peerGone).
      if (this.serverGone.has(episode.id)) return send(res, 502, { error: { name: 'PeerGoneError', message: `the server peer hosting ${episode.id} is gone` } });
      if (episode.state !== 'active') return send(res, 409, { error: { name: 'ConflictError', message: `episode ${episode.id} is ${episode.state}` } });
      if ('reward' in parsed.data) {
        episode.state = 'ended';
        episode.reward = parsed.data.reward;
      } else {
        episode.state = 'aborted';
        episode.reason = parsed.data.reason;
      }
      // No model here, so no calls and no timelines.
      return send(res, 200, { episodeId: episode.id, state: episode.state, calls: 0, timelines: 0 });
    }
    return send(res, 404, { error: { name: 'NotFoundError', message: `no route ${url.pathname}` } });
  }

  private begin(req: IncomingMessage, res: ServerResponse, body: unknown) {
    const answered = (status: number) => {
      const begin = { at: Date.now(), status };
      this.begins.push(begin);
      this.events.emit('begin', begin);
    };
    const next = this.failures[0];
    if (next) {
      if (--next.count <= 0) this.failures.shift();
      if (next.failure.kind === 'drop') {
        req.socket.destroy();
        return answered(0);
      }
      const retryAfterS = next.failure.retryAfterS ?? DEFAULT_RETRY_AFTER_S;
      const name = next.failure.status === 429 ? 'PoolFullError' : 'ServiceUnavailableError';
      send(res, next.failure.status, { error: { name, message: next.failure.status === 429 ? 'pool full' : 'model updating' } }, { 'Retry-After': String(retryAfterS) });
      return answered(next.failure.status);
    }
    const parsed = createEpisodeRequestSchema.safeParse(body);
    if (!parsed.success) {
      send(res, 400, { error: { name: 'InvalidRequestError', message: parsed.error.issues[0].message } });
      return answered(400);
    }
    const hosted = this.models.find((m) => m.name === parsed.data.model || m.aliases.includes(parsed.data.model));
    if (!hosted) {
      send(res, 404, { error: { name: 'NotFoundError', message: `model "${parsed.data.model}" is not hosted` } });
      return answered(404);
    }
    const id = `ep-${randomBytes(6).toString('hex')}`;
    this.episodes.set(id, {
      id,
      model: hosted.name,
      taskId: parsed.data.taskId,
      kind: parsed.data.kind,
      client: parsed.data.client,
      scriptHash: parsed.data.scriptHash,
      teamId: parsed.data.teamId,
      state: 'active',
    });
    send(res, 201, { episodeId: id, baseUrl: `${this.url}/v1`, apiKey: `aj-ep-${id}.${randomBytes(8).toString('hex')}`, model: hosted.name, policyVersion: 0, step: 0, evalEvery: 0 });
    answered(201);
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}
