/**
 * The contract between the episode-API double (testing/episode-api-double.ts) and the REAL episode routes
 * (testing/episode-server.ts): the same requests go to both, and both must answer with the same status codes,
 * error names and Retry-After headers. The double's injected refusals (503 while a model updates, 429 pool
 * full) are compared with the real server really updating and really full. Run it after changing either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EpisodeApiDouble } from './testing/episode-api-double.ts';
import { startEpisodeServer, type EpisodeServer } from './testing/episode-server.ts';

/** Small, so that the contract can fill it. */
const POOL_LIMIT = 2;

interface Answer {
  status: number;
  /** The error's name, or the answer's keys when it is not an error. */
  shape: string;
  retryAfter: boolean;
}

/** One side of the contract: where to send, with what token, and how to make it busy or full. */
interface Side {
  swarmUrl: string;
  token: string;
  /** The next begin is refused as while the model updates. */
  updating(): void;
  /** The next begin is refused as with a full pool (begin: starts what fills it). */
  full(begin: () => Promise<Answer>): Promise<void>;
}

type Sent = Answer & { id?: string; json: Record<string, unknown> };

async function send(side: Side, method: string, path: string, body?: unknown, token = side.token): Promise<Sent> {
  const res = await fetch(side.swarmUrl + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  const error = json.error as { name?: string } | undefined;
  return {
    status: res.status,
    shape: error ? String(error.name) : Object.keys(json).sort().join(','),
    retryAfter: res.headers.has('retry-after'),
    id: typeof json.episodeId === 'string' ? json.episodeId : undefined,
    json,
  };
}

/** The conversation both sides have; returns what each request got. */
async function conversation(side: Side): Promise<Record<string, Answer>> {
  const seen: Record<string, Answer> = {};
  const keep = (name: string, a: Sent): Sent => {
    seen[name] = { status: a.status, shape: a.shape, retryAfter: a.retryAfter };
    return a;
  };
  const begin = (extra: Record<string, unknown> = {}) => send(side, 'POST', '/episodes', { model: 'tiny', taskId: 'contract', client: 'contract', ...extra });

  keep('status', await send(side, 'GET', '/status'));
  keep('wrong token', await send(side, 'POST', '/episodes', { model: 'tiny', taskId: 't' }, 'not-the-token'));
  keep('begin, bad body', await send(side, 'POST', '/episodes', { taskId: 't' }));
  keep('begin, unknown model', await begin({ model: 'no-such-model' }));
  const first = keep('begin', await begin());
  const second = keep('begin by host alias', await begin({ model: 'gpt-4o-mini', kind: 'eval' }));
  expect(second.json.model).toBe('tiny');
  keep('end, bad body', await send(side, 'POST', `/episodes/${first.id}/end`, { reward: 'high' }));
  const ended = keep('end', await send(side, 'POST', `/episodes/${first.id}/end`, { reward: 1, success: true }));
  expect(ended.json).toMatchObject({ episodeId: first.id, state: 'ended', calls: 0, timelines: 0 });
  keep('end again (late)', await send(side, 'POST', `/episodes/${first.id}/end`, { reward: 1 }));
  keep('abort after end', await send(side, 'POST', `/episodes/${first.id}/abort`, { reason: 'late' }));
  keep('abort', await send(side, 'POST', `/episodes/${second.id}/abort`, { reason: 'the script failed' }));
  keep('end unknown episode', await send(side, 'POST', '/episodes/ep_nosuchepisode/end', { reward: 0 }));
  keep('abort unknown episode', await send(side, 'POST', '/episodes/ep_nosuchepisode/abort', { reason: 'x' }));

  side.updating();
  keep('begin while updating', await begin());
  await side.full(begin);
  keep('begin with the pool full', await begin());
  return seen;
}

let real: EpisodeServer;
let double: EpisodeApiDouble;
beforeAll(async () => {
  [real, double] = await Promise.all([startEpisodeServer({ poolLimit: POOL_LIMIT }), EpisodeApiDouble.start()]);
});
afterAll(async () => {
  await Promise.all([real?.close(), double?.close()]);
});

describe('the episode-API double answers like the real episode routes', () => {
  it('same status codes, error names, answer shapes and Retry-After for the same requests', async () => {
    const realSide: Side = {
      swarmUrl: real.swarmUrl,
      token: real.token,
      updating: () => real.model.setState('updating'),
      full: async (begin) => {
        real.model.resume();
        for (let i = 0; i < POOL_LIMIT; i++) expect((await begin()).status).toBe(201);
      },
    };
    const doubleSide: Side = {
      swarmUrl: double.swarmUrl,
      token: double.token,
      updating: () => double.failBegins(1, { kind: 'busy', status: 503 }),
      full: async () => double.failBegins(1, { kind: 'busy', status: 429 }),
    };
    const fromReal = await conversation(realSide);
    const fromDouble = await conversation(doubleSide);
    expect(fromDouble).toEqual(fromReal);
    // And the contract says something: the answers that matter to the runner are what the docs promise.
    expect(fromReal['begin']).toEqual({ status: 201, shape: 'apiKey,baseUrl,episodeId,evalEvery,model,policyVersion,step', retryAfter: false });
    expect(fromReal['end again (late)']).toEqual({ status: 409, shape: 'ConflictError', retryAfter: false });
    expect(fromReal['begin while updating']).toEqual({ status: 503, shape: 'ServiceUnavailableError', retryAfter: true });
    expect(fromReal['begin with the pool full']).toEqual({ status: 429, shape: 'PoolFullError', retryAfter: true });
  });
});
