/**
 * TEST DOUBLE of the *remote* episode API (`/swarm/v1`) and of the gateway's chat endpoint (`/v1`), served over
 * real HTTP on loopback. The runner only ever talks HTTP to these endpoints, so tests of the runner's own
 * behaviour (processes, limits, scheduling, hot swap, teams) use this small server where the peer's real
 * episode service would need a model. It follows swarm/common/swarm-api.ts: the same request schemas, the same
 * answers and error shape. The model's "reply" is canned (`echo: <last user message>`); tool calls are never made.
 */
import { randomBytes } from 'node:crypto';
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
  aliases: string[];
  apiKey: string;
  state: 'active' | 'ended' | 'aborted';
  reward?: number;
  reason?: string;
  calls: number;
}

export class EpisodeApiDouble {
  readonly token = randomBytes(12).toString('hex');
  readonly episodes = new Map<string, DoubleEpisode>();
  /** Answer begin with 503 this many times (a draining server). */
  refuseBegins = 0;
  private server!: Server;
  url = '';

  /** The models the double "hosts", each with the aliases its host would answer to. */
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
    if (url.pathname === '/v1/chat/completions') return this.chat(res, bearer, body);
    if (bearer !== this.token) return send(res, 401, { error: { name: 'AuthenticationError', message: 'wrong token' } });
    if (req.method === 'GET' && url.pathname === '/swarm/v1/status') {
      return send(res, 200, { nodeId: 'double', models: this.models.map((m) => ({ ...m, engineState: 'rolling', policyVersion: 0 })), episodes: { active: this.list({ state: 'active' }).length } });
    }
    if (req.method === 'POST' && url.pathname === '/swarm/v1/episodes') {
      if (this.refuseBegins > 0) {
        this.refuseBegins--;
        return send(res, 503, { error: { name: 'ServiceUnavailableError', message: 'draining' } });
      }
      const parsed = createEpisodeRequestSchema.safeParse(body);
      if (!parsed.success) return send(res, 400, { error: { name: 'InvalidRequestError', message: parsed.error.issues[0].message } });
      const hosted = this.models.find((m) => m.name === parsed.data.model);
      const id = `ep-${randomBytes(6).toString('hex')}`;
      const episode: DoubleEpisode = {
        id,
        model: parsed.data.model,
        taskId: parsed.data.taskId,
        kind: parsed.data.kind,
        client: parsed.data.client,
        scriptHash: parsed.data.scriptHash,
        teamId: parsed.data.teamId,
        // Like the real gateway: the host's aliases of the model, then the episode's own.
        aliases: [...(hosted?.aliases ?? []), ...(parsed.data.aliases ?? [])],
        apiKey: `aj-ep-${id}.${randomBytes(8).toString('hex')}`,
        state: 'active',
        calls: 0,
      };
      this.episodes.set(id, episode);
      return send(res, 200, { episodeId: id, baseUrl: `${this.url}/v1`, apiKey: episode.apiKey, model: episode.model, policyVersion: 0 });
    }
    const m = /^\/swarm\/v1\/episodes\/([^/]+)\/(end|abort)$/.exec(url.pathname);
    if (req.method === 'POST' && m) {
      const episode = this.episodes.get(m[1]);
      if (!episode) return send(res, 404, { error: { name: 'NotFoundError', message: 'no such episode' } });
      if (episode.state !== 'active') return send(res, 409, { error: { name: 'EpisodeClosedError', message: `episode is ${episode.state}` } });
      if (m[2] === 'end') {
        const parsed = endEpisodeRequestSchema.safeParse(body);
        if (!parsed.success) return send(res, 400, { error: { name: 'InvalidRequestError', message: parsed.error.issues[0].message } });
        episode.state = 'ended';
        episode.reward = parsed.data.reward;
      } else {
        const parsed = abortEpisodeRequestSchema.safeParse(body);
        if (!parsed.success) return send(res, 400, { error: { name: 'InvalidRequestError', message: parsed.error.issues[0].message } });
        episode.state = 'aborted';
        episode.reason = parsed.data.reason;
      }
      return send(res, 200, { episodeId: episode.id, state: episode.state, calls: episode.calls, timelines: 0 });
    }
    return send(res, 404, { error: { name: 'NotFoundError', message: `no route ${url.pathname}` } });
  }

  private chat(res: ServerResponse, key: string | undefined, body: unknown) {
    const episode = [...this.episodes.values()].find((e) => e.apiKey === key && e.state === 'active');
    if (!episode) return send(res, 401, { error: { message: 'invalid episode key', type: 'authentication_error', code: 'invalid_api_key' } });
    const request = body as { model?: string; messages?: { role: string; content: string }[] };
    if (request.model !== episode.model && !episode.aliases.includes(request.model ?? '')) {
      return send(res, 404, { error: { message: `model "${request.model}" is not this episode's`, type: 'not_found_error', code: 'model_not_found' } });
    }
    episode.calls++;
    const lastUser = [...(request.messages ?? [])].reverse().find((m) => m.role === 'user');
    return send(res, 200, {
      id: `chatcmpl-${episode.calls}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: request.model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: `echo: ${lastUser?.content ?? ''}` } }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
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

function send(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
