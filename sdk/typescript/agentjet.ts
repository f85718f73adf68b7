/**
 * AgentJet SDK for TypeScript/JavaScript agents. One file, no dependencies (global fetch, Node 18+): copy it
 * into any project.
 *
 * Two ways to take part in training:
 *
 * 1. Per episode (the runner starts your script once per episode):
 *      const { task, baseUrl, apiKey, model } = episodeFromEnv();
 *      … call the model with any OpenAI client …
 *      reportResult({ reward: 1 });          // prints the final {"reward": …} line
 *
 * 2. Long-running (your own process begins and ends many episodes at once, like a swarm client):
 *      const swarm = new SwarmClient();     // AGENTJET_SWARM_URL + AGENTJET_CLIENT_KEY
 *      await swarm.run(tasks, async (episode, task) => ({ reward: … }), { model: 'tiny', concurrency: 8 });
 */

export interface EpisodeResult {
  reward: number;
  success?: boolean;
  metrics?: Record<string, number>;
}
export type TeamResult = { rewards: Record<string, number>; success?: boolean; metrics?: Record<string, number> };

export interface EpisodeEnv<T = Record<string, unknown>> {
  task: T & { id: string | number };
  taskId: string;
  kind: 'train' | 'eval';
  episodeId: string;
  /** OpenAI clients' base URL (`…/v1`). */
  baseUrl: string;
  /** Anthropic clients' base URL: the origin (they append `/v1/messages`); the same gateway and key. */
  anthropicBaseUrl: string;
  apiKey: string;
  model: string;
}

/** The Anthropic clients' base URL for an OpenAI one: the origin, without `/v1`. */
export function anthropicBaseUrlOf(baseUrl: string): string {
  return baseUrl.replace(/\/v1\/?$/, '');
}

export class AgentJetError extends Error {
  override name = 'AgentJetError';
  constructor(
    message: string,
    readonly status = 0,
    readonly errorName = 'AgentJetError',
  ) {
    super(message);
  }
}

/** The episode the runner started this process for; `role` picks a team member's model (`proposer`, …). */
export function episodeFromEnv<T = Record<string, unknown>>(role?: string, env: Record<string, string | undefined> = process.env): EpisodeEnv<T> {
  const suffix = role ? `_${role.toUpperCase()}` : '';
  const need = (name: string) => {
    const value = env[name];
    if (value === undefined) throw new AgentJetError(`${name} is not set: run this script through \`agentjet attach\` (or set it yourself)`);
    return value;
  };
  return {
    task: JSON.parse(need('AGENTJET_TASK')) as T & { id: string | number },
    taskId: env.AGENTJET_TASK_ID ?? '',
    kind: env.AGENTJET_EPISODE_KIND === 'eval' ? 'eval' : 'train',
    episodeId: need(`AGENTJET_EPISODE_ID${suffix}`),
    baseUrl: need(`OPENAI_BASE_URL${suffix}`),
    anthropicBaseUrl: env[`ANTHROPIC_BASE_URL${suffix}`] ?? anthropicBaseUrlOf(need(`OPENAI_BASE_URL${suffix}`)),
    apiKey: need(`OPENAI_API_KEY${suffix}`),
    model: need(`AGENTJET_MODEL${suffix}`),
  };
}

/** Prints the result line the runner reads: it must be the last thing on stdout. */
export function reportResult(result: EpisodeResult | TeamResult): void {
  process.stdout.write(JSON.stringify(result) + '\n');
}

export interface BeginOptions {
  model: string;
  taskId: string;
  kind?: 'train' | 'eval';
  idleTimeoutS?: number;
  sampling?: Record<string, number>;
  scriptHash?: string;
  teamId?: string;
}

/**
 * One running episode: hand `baseUrl`/`apiKey`/`model` to your OpenAI client (Chat Completions or Responses), or
 * `anthropicBaseUrl`/`apiKey` to an Anthropic client (Messages), then end or abort it.
 */
export class Episode {
  private closed = false;
  /** Anthropic clients' base URL (the origin): they reach the same gateway with the same key. */
  get anthropicBaseUrl(): string {
    return anthropicBaseUrlOf(this.baseUrl);
  }

  constructor(
    private readonly swarm: SwarmClient,
    readonly id: string,
    readonly baseUrl: string,
    readonly apiKey: string,
    readonly model: string,
    readonly policyVersion: number,
  ) {}

  async end(result: EpisodeResult): Promise<void> {
    this.closed = true;
    await this.swarm.request('POST', `/episodes/${encodeURIComponent(this.id)}/end`, result);
  }

  async abort(reason: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.swarm.request('POST', `/episodes/${encodeURIComponent(this.id)}/abort`, { reason: reason.slice(0, 2000) || 'aborted' });
  }
}

export interface RunOptions<T> {
  model: string;
  /** Episodes at once. */
  concurrency?: number;
  /** GRPO group size: each task runs this many times. */
  repeat?: number;
  kind?: 'train' | 'eval';
  taskId?: (task: T) => string;
  idleTimeoutS?: number;
}

export interface RunSummary {
  ended: number;
  aborted: number;
  meanReward: number | null;
  /** Why episodes were aborted (an agent that threw, a refused result). */
  errors: string[];
}

/** Talks to a peer's swarm protocol (`/swarm/v1`) with a client key. */
export class SwarmClient {
  readonly url: string;
  private readonly key: string;

  constructor(options: { url?: string; key?: string } = {}) {
    const url = options.url ?? process.env.AGENTJET_SWARM_URL;
    const key = options.key ?? process.env.AGENTJET_CLIENT_KEY;
    if (!url || !key) throw new AgentJetError('give url and key, or set AGENTJET_SWARM_URL and AGENTJET_CLIENT_KEY (`agentjet clients key NAME` prints them)');
    this.url = url.replace(/\/+$/, '');
    this.key = key;
  }

  /** Starts an episode; a busy server (503 draining, 429) is retried with backoff. */
  async begin(options: BeginOptions, retries = 5): Promise<Episode> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.beginOnce(options);
      } catch (err) {
        const status = (err as AgentJetError).status ?? 0;
        if (![0, 429, 503].includes(status) || attempt >= retries) throw err;
        await new Promise((resolve) => setTimeout(resolve, Math.min(10_000, 200 * 2 ** attempt)));
      }
    }
  }

  private async beginOnce(options: BeginOptions): Promise<Episode> {
    const body = (await this.request('POST', '/episodes', { kind: 'train', ...options })) as {
      episodeId: string;
      baseUrl: string;
      apiKey: string;
      model: string;
      policyVersion: number;
    };
    return new Episode(this, body.episodeId, body.baseUrl, body.apiKey, body.model, body.policyVersion);
  }

  status(): Promise<unknown> {
    return this.request('GET', '/status');
  }

  /**
   * Runs `agent` on every task (`repeat` times each), `concurrency` episodes at once: begin → agent → end with
   * its reward. An agent that throws aborts its episode (never trained on) and the run goes on.
   */
  async run<T>(tasks: Iterable<T> | AsyncIterable<T>, agent: (episode: Episode, task: T) => Promise<EpisodeResult>, options: RunOptions<T>): Promise<RunSummary> {
    const repeat = options.repeat ?? 1;
    const summary: RunSummary = { ended: 0, aborted: 0, meanReward: null, errors: [] };
    let rewardSum = 0;
    const taskIdOf = options.taskId ?? ((t: T) => String((t as { id?: unknown }).id));
    async function* jobs() {
      for await (const task of tasks) for (let r = 0; r < repeat; r++) yield task;
    }
    const queue = jobs();
    const worker = async () => {
      for (;;) {
        const next = await queue.next();
        if (next.done) return;
        const task = next.value;
        const episode = await this.begin({ model: options.model, taskId: taskIdOf(task), kind: options.kind, idleTimeoutS: options.idleTimeoutS });
        let result: EpisodeResult;
        try {
          result = await agent(episode, task);
          if (typeof result?.reward !== 'number' || !Number.isFinite(result.reward)) throw new AgentJetError('the agent must return { reward: number }');
        } catch (err) {
          const reason = `${(err as Error).name}: ${(err as Error).message}`;
          summary.aborted++;
          summary.errors.push(reason);
          await episode.abort(reason);
          continue;
        }
        await episode.end(result);
        summary.ended++;
        rewardSum += result.reward;
      }
    };
    await Promise.all(Array.from({ length: options.concurrency ?? 4 }, worker));
    summary.meanReward = summary.ended > 0 ? rewardSum / summary.ended : null;
    return summary;
  }

  /** @internal */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    const json = text ? (JSON.parse(text) as unknown) : {};
    if (!res.ok) {
      const error = (json as { error?: { name?: string; message?: string } }).error;
      throw new AgentJetError(`${method} ${path}: ${res.status} ${error?.message ?? text.slice(0, 200)}`, res.status, error?.name);
    }
    return json;
  }
}
