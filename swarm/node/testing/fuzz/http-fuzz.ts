/**
 * The HTTP fuzz against a real peer (peer.ts: a child process on 127.0.0.1). Requests are sampled from
 * requests.ts with a seed and sent one at a time, in batches; per request and per batch it checks the invariants:
 *   - the peer never crashes: it stays up, and its unhandled-rejection / uncaught-exception count stays 0;
 *   - no 5xx for any request, except 503 and 507 (documented: model draining or updating; disk full);
 *   - a rejected request (4xx, or no answer) changes nothing: the store's counts, the live episodes and the
 *     acting parts of the status are equal before and after it;
 *   - after each batch the peer still serves a valid episode (begin, one chat call, end) and its status.
 * One request at a time is what makes "this request changed the state" attributable; batches give each a pool of
 * live episodes to aim at (ended or aborted again by the fuzz, which the peer must refuse with 409).
 */
import fc from 'fast-check';
import { startFuzzPeer, type ChildSnapshot, type FuzzPeer, type HangUp, type PeerState, type RawResponse } from './peer.ts';
import { anyRequest, describeRequest, requestOf, serialize, type Family, type FuzzRequest, type SendContext } from './requests.ts';

/** A request the peer has not answered in this long hangs: reported as a timeout (the peer's own limits are longer). */
export const REQUEST_TIMEOUT_MS = 10_000;
/** Live episodes each batch aims its requests at: enough for end/abort/call mixes, far below the pool limit. */
const POOL_EPISODES = 6;
/** Failures kept for the report, per kind; the counts go on past it. */
const MAX_FAILURES_KEPT = 25;
/** Requests in flight at once in the concurrent phase: more than the engine batches, fewer than the pool limit. */
const BURST_CONCURRENCY = 16;
/** The concurrent phase aims at this few episodes, so that requests race on the same ones. */
const BURST_POOL_EPISODES = 3;
/** Concurrent requests per wave before the pool is refreshed and liveness checked. */
const BURST_WAVE = 200;
/** Slowest requests listed in the figures. */
const SLOWEST_KEPT = 5;
/** Statuses a malformed request may get from the 5xx range, each documented: draining/updating, disk full. */
const ALLOWED_5XX = new Set([503, 507]);

export interface HttpFuzzOptions {
  seed: number;
  requests: number;
  /**
   * Then this many more, BURST_CONCURRENCY at a time against a small shared pool (ends, aborts and calls racing on
   * the same episodes), some clients hanging up mid-request. Checked for crashes, 5xx and liveness only: with
   * requests in flight together, no state change can be pinned on one of them.
   */
  concurrentRequests?: number;
  /** Requests between liveness checks (and pool refreshes). */
  batchSize: number;
  families?: readonly Family[];
  /** Stops early (the figures say how many were sent) once this much time is spent. */
  timeBudgetMs?: number;
  log?: (line: string) => void;
}

export type FailureKind = 'crash' | 'peer-exit' | '5xx' | 'state-change' | 'liveness' | 'timeout';
export interface Failure {
  kind: FailureKind;
  index?: number;
  request?: string;
  status?: number;
  errorName?: string | null;
  detail?: string;
}

export interface HttpFuzzFigures {
  seed: number;
  requests: number;
  crashes: number;
  status_5xx: number;
  state_changes_from_rejected: number;
  valid_after_batch_failures: number;
  timeouts: number;
  no_answer: number;
  rejected: number;
  accepted: number;
  concurrent_requests: number;
  hung_up: number;
  batches: number;
  by_status: Record<string, number>;
  by_family: Record<string, number>;
  duration_s: number;
  p50_request_ms: number;
  /** The slowest requests: where a run's time went (a valid call generating, a body at its size limit). */
  slowest: { ms: number; status: number; request: string }[];
  failures: Failure[];
}

interface JsonAnswer {
  status: number;
  json: Record<string, unknown> | null;
}

export async function sendJson(peer: FuzzPeer, method: string, path: string, bearer: string | null, body?: unknown): Promise<JsonAnswer> {
  const payload = body === undefined ? '' : JSON.stringify(body);
  const head = [`${method} ${path} HTTP/1.1`, `Host: 127.0.0.1:${peer.port}`, 'Connection: close'];
  if (bearer) head.push(`Authorization: Bearer ${bearer}`);
  if (body !== undefined) head.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(payload)}`);
  const res = await peer.send(Buffer.from(`${head.join('\r\n')}\r\n\r\n${payload}`), REQUEST_TIMEOUT_MS);
  let json: Record<string, unknown> | null = null;
  try {
    json = JSON.parse(res.body) as Record<string, unknown>;
  } catch {
    // Non-JSON answers are judged by status alone.
  }
  return { status: res.status, json };
}

export async function beginEpisode(peer: FuzzPeer, taskId: string): Promise<{ id: string; apiKey: string } | undefined> {
  const res = await sendJson(peer, 'POST', '/swarm/v1/episodes', peer.token, { model: 'tiny', taskId, kind: 'eval', sampling: { max_tokens: 1 } });
  if (res.status !== 201 || !res.json) return undefined;
  return { id: String(res.json.episodeId), apiKey: String(res.json.apiKey) };
}

/** A valid episode end to end, and the status routes: what "the peer still serves" means after a batch. */
export async function liveness(peer: FuzzPeer): Promise<string | undefined> {
  const status = await sendJson(peer, 'GET', '/api/status', peer.token);
  if (status.status !== 200) return `GET /api/status answered ${status.status}`;
  const swarm = await sendJson(peer, 'GET', '/swarm/v1/status', peer.token);
  if (swarm.status !== 200) return `GET /swarm/v1/status answered ${swarm.status}`;
  const episode = await beginEpisode(peer, 'fuzz-liveness');
  if (!episode) return 'a valid episode begin was refused';
  const call = await sendJson(peer, 'POST', '/v1/chat/completions', episode.apiKey, { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  if (call.status !== 200) return `a valid chat call answered ${call.status}`;
  const end = await sendJson(peer, 'POST', `/swarm/v1/episodes/${episode.id}/end`, peer.token, { reward: 1 });
  if (end.status !== 200) return `a valid end answered ${end.status}`;
  return undefined;
}

/** The episode a fuzzed begin started (its slot is freed at the end of the batch), if it was one. */
function begunEpisode(request: FuzzRequest, res: RawResponse): string | undefined {
  if (res.status !== 201 || !request.target.endsWith('/swarm/v1/episodes')) return undefined;
  return /"episodeId":"([^"]+)"/.exec(res.body)?.[1];
}

/** The keys of the state that differ (top level, and inside `status` / `episodesByState`). */
export function stateDiff(a: PeerState, b: PeerState): string[] {
  const out: string[] = [];
  for (const key of Object.keys(a) as (keyof PeerState)[]) {
    if (JSON.stringify(a[key]) !== JSON.stringify(b[key])) out.push(`${key}: ${JSON.stringify(a[key])} → ${JSON.stringify(b[key])}`);
  }
  return out;
}

export async function runHttpFuzz(options: HttpFuzzOptions): Promise<HttpFuzzFigures> {
  const log = options.log ?? (() => {});
  const arbitrary = options.families ? fc.oneof(...options.families.map((f) => requestOf[f])) : anyRequest;
  const cases: FuzzRequest[] = fc.sample(arbitrary, { seed: options.seed, numRuns: options.requests });
  const started = performance.now();
  const figures: HttpFuzzFigures = {
    seed: options.seed,
    requests: 0,
    crashes: 0,
    status_5xx: 0,
    state_changes_from_rejected: 0,
    valid_after_batch_failures: 0,
    timeouts: 0,
    no_answer: 0,
    rejected: 0,
    accepted: 0,
    concurrent_requests: 0,
    hung_up: 0,
    batches: 0,
    by_status: {},
    by_family: {},
    duration_s: 0,
    p50_request_ms: 0,
    slowest: [],
    failures: [],
  };
  const durations: number[] = [];
  const kept = new Map<FailureKind, number>();
  const fail = (failure: Failure) => {
    const n = kept.get(failure.kind) ?? 0;
    kept.set(failure.kind, n + 1);
    if (n < MAX_FAILURES_KEPT) figures.failures.push(failure);
  };

  let peer = await startFuzzPeer();
  let crashesSeen = 0;
  let latest: ChildSnapshot | undefined;
  /** The peer's newest error log line, as of the latest snapshot: what a 5xx or a failed liveness check was. */
  const lastErrorLine = () => latest?.errorLines.slice(-1)[0];
  const checkCrashes = (snapshot: ChildSnapshot, index?: number, request?: string) => {
    latest = snapshot;
    if (snapshot.crashes > crashesSeen) {
      figures.crashes += snapshot.crashes - crashesSeen;
      fail({ kind: 'crash', index, request, detail: snapshot.crashReasons.slice(-1)[0] });
      crashesSeen = snapshot.crashes;
    }
  };
  const judge = (request: FuzzRequest, res: RawResponse, index?: number) => {
    if (res.timedOut) {
      figures.timeouts++;
      fail({ kind: 'timeout', index, request: describeRequest(request) });
    }
    if (res.status === 0) figures.no_answer++;
    if (res.status >= 500 && !ALLOWED_5XX.has(res.status)) {
      figures.status_5xx++;
      fail({ kind: '5xx', index, request: describeRequest(request), status: res.status, errorName: res.errorName, detail: lastErrorLine() });
    }
  };

  const concurrentPhase = async () => {
    const total = options.concurrentRequests ?? 0;
    if (total === 0 || peer.exited()) return;
    const burst = fc.sample(fc.tuple(arbitrary, fc.constantFrom<HangUp | undefined>(undefined, undefined, undefined, 'after-write', 'after-first-byte')), {
      seed: options.seed + 1,
      numRuns: total,
    });
    for (let wave = 0; wave < burst.length; wave += BURST_WAVE) {
      const pool: { id: string; apiKey: string }[] = [];
      for (let i = 0; i < BURST_POOL_EPISODES; i++) {
        const episode = await beginEpisode(peer, 'fuzz-burst');
        if (episode) pool.push(episode);
      }
      const ctx: SendContext = { port: peer.port, token: peer.token, episodes: pool };
      const waveCases = burst.slice(wave, wave + BURST_WAVE);
      const begun: string[] = [];
      let next = 0;
      const lane = async () => {
        while (next < waveCases.length) {
          const [request, hangUp] = waveCases[next++];
          const res = await peer.send(serialize(request, ctx), REQUEST_TIMEOUT_MS, request.raw !== undefined, hangUp);
          figures.requests++;
          figures.concurrent_requests++;
          figures.by_status[res.status] = (figures.by_status[res.status] ?? 0) + 1;
          figures.by_family[request.family] = (figures.by_family[request.family] ?? 0) + 1;
          if (hangUp) figures.hung_up++;
          else judge(request, res);
          const begunId = begunEpisode(request, res);
          if (begunId) begun.push(begunId);
        }
      };
      await Promise.all(Array.from({ length: BURST_CONCURRENCY }, lane));
      if (peer.exited()) {
        figures.crashes++;
        fail({ kind: 'peer-exit', detail: `in the concurrent phase: ${peer.exitReason()}` });
        return;
      }
      checkCrashes(await peer.snapshot(), undefined, 'the concurrent phase (several requests in flight)');
      for (const id of [...pool.map((e) => e.id), ...begun]) await sendJson(peer, 'POST', `/swarm/v1/episodes/${id}/abort`, peer.token, { reason: 'fuzz wave over' });
      const problem = await liveness(peer);
      if (problem) {
        figures.valid_after_batch_failures++;
        latest = await peer.snapshot();
        fail({ kind: 'liveness', detail: `after a concurrent wave: ${problem}; peer log: ${lastErrorLine()}` });
      }
      log(`concurrent: ${figures.concurrent_requests} requests, ${figures.status_5xx} 5xx, ${figures.crashes} crashes`);
    }
  };

  try {
    for (let offset = 0; offset < cases.length; offset += options.batchSize) {
      if (options.timeBudgetMs !== undefined && performance.now() - started > options.timeBudgetMs) {
        log(`time budget spent after ${figures.requests} requests`);
        break;
      }
      figures.batches++;
      const pool: { id: string; apiKey: string }[] = [];
      for (let i = 0; i < POOL_EPISODES; i++) {
        const episode = await beginEpisode(peer, `fuzz-pool-${i % 2}`);
        if (episode) pool.push(episode);
      }
      const ctx: SendContext = { port: peer.port, token: peer.token, episodes: pool };
      const begun: string[] = [];
      let before = await peer.snapshot();
      checkCrashes(before);
      for (let index = offset; index < Math.min(cases.length, offset + options.batchSize); index++) {
        const request = cases[index];
        const sentAt = performance.now();
        const res: RawResponse = await peer.send(serialize(request, ctx), REQUEST_TIMEOUT_MS, request.raw !== undefined);
        const ms = Math.round(performance.now() - sentAt);
        durations.push(ms);
        if (figures.slowest.length < SLOWEST_KEPT || ms > figures.slowest[figures.slowest.length - 1].ms) {
          figures.slowest = [...figures.slowest, { ms, status: res.status, request: describeRequest(request) }].sort((a, b) => b.ms - a.ms).slice(0, SLOWEST_KEPT);
        }
        figures.requests++;
        figures.by_status[res.status] = (figures.by_status[res.status] ?? 0) + 1;
        figures.by_family[request.family] = (figures.by_family[request.family] ?? 0) + 1;
        if (peer.exited()) {
          figures.crashes++;
          fail({ kind: 'peer-exit', index, request: describeRequest(request), detail: peer.exitReason() ?? undefined });
          await peer.stop();
          peer = await startFuzzPeer();
          crashesSeen = 0;
          break;
        }
        const after = await peer.snapshot();
        checkCrashes(after, index, describeRequest(request));
        judge(request, res, index);
        const rejected = res.status === 0 || res.status >= 400;
        if (rejected) {
          figures.rejected++;
          const diff = stateDiff(before.state, after.state);
          if (diff.length > 0) {
            figures.state_changes_from_rejected++;
            fail({ kind: 'state-change', index, request: describeRequest(request), status: res.status, errorName: res.errorName, detail: diff.join('; ') });
          }
        } else {
          figures.accepted++;
          const begunId = begunEpisode(request, res);
          if (begunId) begun.push(begunId);
        }
        before = after;
      }
      // Free the pool's slots: what the fuzz did not end or abort, the control token aborts (409s are expected).
      for (const id of [...pool.map((e) => e.id), ...begun]) await sendJson(peer, 'POST', `/swarm/v1/episodes/${id}/abort`, peer.token, { reason: 'fuzz batch over' });
      const problem = await liveness(peer);
      if (problem) {
        figures.valid_after_batch_failures++;
        latest = await peer.snapshot();
        fail({ kind: 'liveness', index: Math.min(cases.length, offset + options.batchSize) - 1, detail: `${problem}; peer log: ${lastErrorLine()}` });
      }
      log(`batch ${figures.batches}: ${figures.requests} requests, ${figures.status_5xx} 5xx, ${figures.state_changes_from_rejected} state changes, ${figures.crashes} crashes`);
    }
    await concurrentPhase();
    checkCrashes(await peer.snapshot());
  } finally {
    await peer.stop();
  }
  figures.duration_s = Math.round((performance.now() - started) / 100) / 10;
  durations.sort((a, b) => a - b);
  figures.p50_request_ms = durations[Math.floor(durations.length / 2)] ?? 0;
  return figures;
}
