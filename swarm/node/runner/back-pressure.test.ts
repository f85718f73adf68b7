/**
 * Back-pressure: while a model updates the server answers begins with 503 and Retry-After (429 when its pool is
 * full; a dropped connection says nothing). A refused start is no run: it waits the server's Retry-After, writes
 * no run row, is not counted as started or as a failure (the breaker never sees it), and the task keeps its
 * place. The real routes cannot be made to refuse on demand, so the episode-API double injects the refusals;
 * its answers are checked against the real routes in episode-api-double.contract.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { retryAfterMs } from './episode-api.ts';
import type { DoubleBegin } from './testing/episode-api-double.ts';
import { useRunnerFixture } from './testing/fixture.ts';

const { setupWithDouble, attachInline } = useRunnerFixture();
const REWARD_1 = 'console.log(JSON.stringify({ reward: 1 }));';
const tasks = (n: number) => ({ inline: Array.from({ length: n }, (_, i) => ({ id: `t${i}` })) });

/** The most begins that arrived within any `windowMs` (a sliding window over their arrival times). */
function mostWithin(begins: DoubleBegin[], windowMs: number): number {
  const times = begins.map((b) => b.at).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < times.length; j++) {
    while (times[j] - times[i] >= windowMs) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

describe('refused starts', () => {
  it('503 with Retry-After: begins wait the server’s time, no run rows, nothing counted, the breaker stays shut', async () => {
    const { double, runner } = await setupWithDouble();
    const retryAfterS = 1;
    const concurrency = 2;
    double.failBegins(6, { kind: 'busy', status: 503, retryAfterS });
    await attachInline(runner, 'patient', 'ok.mjs', REWARD_1, { tasks: tasks(4), concurrency, maxConsecutiveFailures: 1 });
    const status = await runner.settled('patient');

    expect(status.state).toBe('finished');
    expect(status.counts).toEqual({ started: 4, ended: 4, aborted: 0, retried: 0, consecutiveFailures: 0 });
    // Only the runs that happened have rows: no "aborted: could not start" row per refusal.
    expect(runner.runs('patient').map((r) => r.status)).toEqual(['ended', 'ended', 'ended', 'ended']);
    const refused = double.begins.filter((b) => b.status === 503);
    expect(refused).toHaveLength(6);
    // After the first refusals (one per slot already asking), the client probes alone: one begin per Retry-After.
    expect(mostWithin(refused.slice(concurrency), retryAfterS * 1000)).toBeLessThanOrEqual(1);
    expect(double.begins.filter((b) => b.status === 201)).toHaveLength(4);
  });

  it('keeps the task order across refusals', async () => {
    const { double, runner } = await setupWithDouble();
    double.failBegins(2, { kind: 'busy', status: 503, retryAfterS: 0 });
    await attachInline(runner, 'ordered', 'ok.mjs', REWARD_1, { tasks: tasks(4), concurrency: 1 });
    await runner.settled('ordered');
    expect(runner.runs('ordered').map((r) => r.taskId)).toEqual(['t0', 't1', 't2', 't3']);
    expect([...double.episodes.values()].map((e) => e.taskId)).toEqual(['t0', 't1', 't2', 't3']);
  });

  it('429 pool full is waited out the same way', async () => {
    const { double, runner } = await setupWithDouble();
    double.failBegins(3, { kind: 'busy', status: 429, retryAfterS: 0 });
    await attachInline(runner, 'pooled', 'ok.mjs', REWARD_1, { tasks: tasks(2), concurrency: 1, maxConsecutiveFailures: 1 });
    const status = await runner.settled('pooled');
    expect(status).toMatchObject({ state: 'finished', counts: { started: 2, ended: 2, aborted: 0 } });
    expect(double.begins.map((b) => b.status)).toEqual([429, 429, 429, 201, 201]);
    expect(runner.runs('pooled')).toHaveLength(2);
  });

  it('a dropped connection waits the default time and is not counted either', async () => {
    const refusedWaitMs = 300;
    const { double, runner } = await setupWithDouble({ refusedWaitMs });
    double.failBegins(2, { kind: 'drop' });
    await attachInline(runner, 'dropped', 'ok.mjs', REWARD_1, { concurrency: 1, maxConsecutiveFailures: 1 });
    const status = await runner.settled('dropped');
    expect(status).toMatchObject({ state: 'finished', counts: { started: 1, ended: 1, aborted: 0, consecutiveFailures: 0 } });
    const [first, second, third] = double.begins;
    expect(double.begins.map((b) => b.status)).toEqual([0, 0, 201]);
    expect(second.at - first.at).toBeGreaterThanOrEqual(refusedWaitMs);
    expect(third.at - second.at).toBeGreaterThanOrEqual(refusedWaitMs);
  });

  it('a paused script’s refused task waits for the resume, in its place', async () => {
    const { double, runner } = await setupWithDouble();
    double.failBegins(1, { kind: 'busy', status: 503, retryAfterS: 0 });
    await attachInline(runner, 'paused', 'ok.mjs', REWARD_1, { tasks: tasks(2), concurrency: 1 });
    // Paused as soon as the refusal came back: nothing may start until resumed.
    await new Promise<void>((resolve) => double.events.once('begin', () => resolve()));
    runner.pause('paused');
    expect((await runner.settled('paused')).counts.started).toBe(0);
    runner.resume('paused');
    await runner.settled('paused');
    expect(runner.runs('paused').map((r) => r.taskId)).toEqual(['t0', 't1']);
  });
});

describe("a server that goes away mid-run", () => {
  it("fails the script's calls, yet counts as server_gone, not as the script's failure: the breaker stays shut", async () => {
    const { double, runner } = await setupWithDouble();
    // The episode's server vanishes while the script runs; its call fails, and so does the script.
    double.events.on('begin', () => {
      for (const id of double.episodes.keys()) double.serverGone.add(id);
    });
    await attachInline(runner, 'stranded', 'fail.mjs', 'process.exit(3);', { tasks: tasks(3), concurrency: 1, maxConsecutiveFailures: 1 });
    const status = await runner.settled('stranded');
    expect(status.state).toBe('finished');
    expect(status.counts).toMatchObject({ started: 3, aborted: 3, consecutiveFailures: 0 });
    expect(runner.runs('stranded').map((r) => r.code)).toEqual(['server_gone', 'server_gone', 'server_gone']);
  });

  it("a script that fails on its own still trips the breaker", async () => {
    const { runner } = await setupWithDouble();
    await attachInline(runner, 'broken', 'fail.mjs', 'process.exit(3);', { tasks: tasks(3), concurrency: 1, maxConsecutiveFailures: 1 });
    const status = await runner.settled('broken');
    expect(status.state).toBe('broken');
    expect(runner.runs('broken').map((r) => r.code)).toEqual(['script_failed']);
  });
});

describe('Retry-After', () => {
  it('reads seconds and HTTP dates; anything else is no header', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('5', now)).toBe(5000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:07 GMT', now)).toBe(7000);
    expect(retryAfterMs('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
    expect(retryAfterMs(null, now)).toBeNull();
    expect(retryAfterMs('soon', now)).toBeNull();
    expect(retryAfterMs('-3', now)).toBeNull();
  });
});
