/**
 * The chaos and fuzz suite, short: a few hundred seeded requests against a real peer on 127.0.0.1 (a child
 * process), and every decoder over garbage and mutated valid input. `AGENTJET_FUZZ_LONG=1` runs the long variant;
 * `AGENTJET_FUZZ_SEED=N` replays a seed (each run prints its own). `npm run bench -- chaos` is the figure-producing
 * version of the same code.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzTarget, runDecoderFuzz, type Finding } from './decoders.ts';
import { beginEpisode, liveness, runHttpFuzz, sendJson, stateDiff } from './http-fuzz.ts';
import { startFuzzPeer, type FuzzPeer, type PeerState } from './peer.ts';

const LONG = process.env.AGENTJET_FUZZ_LONG === '1';
/** A fixed default, so the normal suite is deterministic; the long variant draws one unless told. */
const DEFAULT_SEED = 20_261_201;
const SEED = process.env.AGENTJET_FUZZ_SEED ? Number(process.env.AGENTJET_FUZZ_SEED) : LONG ? Date.now() % 2 ** 31 : DEFAULT_SEED;
/** The normal suite's share: ~10 s on 2 shared cores, peer start included. */
const SHORT_HTTP_REQUESTS = 300;
/** The long variant: what a nightly job can afford (~10 minutes). */
const LONG_HTTP_REQUESTS = 15_000;
/** Then these, 16 in flight with some clients hanging up (crashes, 5xx and liveness checked). */
const SHORT_CONCURRENT_REQUESTS = 100;
const LONG_CONCURRENT_REQUESTS = 5_000;
/** Requests between liveness checks: short runs still get several. */
const BATCH_SIZE = 50;
const SHORT_DECODER_CASES = 200;
const LONG_DECODER_CASES = 5_000;
/** Bounds the whole HTTP fuzz; a wedged peer fails the test instead of hanging it. */
const HTTP_FUZZ_TIMEOUT_MS = LONG ? 30 * 60_000 : 120_000;

console.log(`chaos fuzz seed ${SEED} (replay: AGENTJET_FUZZ_SEED=${SEED}${LONG ? ' AGENTJET_FUZZ_LONG=1' : ''})`);

describe('chaos: HTTP fuzz against a real peer', () => {
  it(
    'never crashes, never answers 5xx, and requests it rejects change nothing',
    async () => {
      const requests = LONG ? LONG_HTTP_REQUESTS : SHORT_HTTP_REQUESTS;
      const concurrentRequests = LONG ? LONG_CONCURRENT_REQUESTS : SHORT_CONCURRENT_REQUESTS;
      const figures = await runHttpFuzz({ seed: SEED, requests, concurrentRequests, batchSize: BATCH_SIZE });
      // The failures first: on a regression the diff shows each input, its status and where it went wrong.
      expect(figures.failures).toEqual([]);
      expect({
        crashes: figures.crashes,
        status_5xx: figures.status_5xx,
        state_changes_from_rejected: figures.state_changes_from_rejected,
        valid_after_batch_failures: figures.valid_after_batch_failures,
        timeouts: figures.timeouts,
      }).toEqual({ crashes: 0, status_5xx: 0, state_changes_from_rejected: 0, valid_after_batch_failures: 0, timeouts: 0 });
      expect(figures.requests).toBe(requests + concurrentRequests);
      // The fuzz must reach past the edge: some requests are accepted, most rejected, across every family.
      expect(figures.accepted).toBeGreaterThan(0);
      expect(figures.rejected).toBeGreaterThan(figures.accepted);
      expect(Object.keys(figures.by_family).sort()).toEqual(['control', 'gateway', 'raw', 'swarm']);
    },
    HTTP_FUZZ_TIMEOUT_MS,
  );

  it('tells a changed state from an unchanged one (the invariant can fail)', () => {
    const state: PeerState = { episodesByState: { active: 1 }, calls: 3, timelines: 1, trainSteps: 0, clientScripts: 0, clientRuns: 0, clientKeys: 0, activeEpisodes: 1, status: { p2p: false } };
    expect(stateDiff(state, structuredClone(state))).toEqual([]);
    expect(stateDiff(state, { ...state, calls: 4 })).toHaveLength(1);
    expect(stateDiff(state, { ...state, episodesByState: { active: 0, aborted: 1 } })).toHaveLength(1);
    expect(stateDiff(state, { ...state, status: { p2p: true } })).toHaveLength(1);
  });
});

describe('chaos: inputs the fuzz found', () => {
  let peer: FuzzPeer;
  beforeAll(async () => {
    peer = await startFuzzPeer();
  });
  afterAll(async () => {
    await peer?.stop();
  });

  // Found with seed 7: 1 / 4.4e-323 is Infinity, every logit NaN, the token id undefined; the stop-string scan
  // then killed the engine thread (every later call 500) and streamed logprobs threw in the gateway's callback.
  it('a denormal temperature is sampled greedily, and the model keeps serving', async () => {
    const episode = await beginEpisode(peer, 'denormal-temperature');
    expect(episode).toBeDefined();
    const call = await sendJson(peer, 'POST', '/v1/chat/completions', episode!.apiKey, {
      model: 'tiny',
      messages: [{ role: 'system', content: '' }],
      max_tokens: 4,
      temperature: 4.4e-323,
      top_p: 0.01,
      logprobs: true,
      stream: true,
      seed: 2147483630,
      stop: '#=',
    });
    expect(call.status).toBe(200);
    expect(await liveness(peer)).toBeUndefined();
    const snapshot = await peer.snapshot();
    expect(snapshot.crashes).toBe(0);
    expect(peer.exited()).toBe(false);
  });

  // Found by the bench (seed 823064656): bytes after an accepted /api/events upgrade that are no valid WebSocket
  // frame made `ws` emit 'error' on a socket nobody listened on: an uncaught exception (process exit without a guard).
  it('a malformed WebSocket frame on /api/events closes that socket, nothing else', async () => {
    const upgrade = [
      `GET /api/events?token=${peer.token} HTTP/1.1`,
      `Host: 127.0.0.1:${peer.port}`,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    ].join('\r\n');
    // FIN + RSV1 + text, masked, empty: RSV1 without a negotiated extension is a protocol error.
    const badFrame = Buffer.from([0xc1, 0x80, 0, 0, 0, 0]);
    const res = await peer.send(Buffer.concat([Buffer.from(`${upgrade}\r\n\r\n`, 'latin1'), badFrame]), 10_000);
    // The socket is dropped at once (its 101 may not get out first): what matters is that it is dropped.
    expect(res.timedOut).toBe(false);
    expect((await peer.snapshot()).crashes).toBe(0);
    expect(await liveness(peer)).toBeUndefined();
  });
});

describe('chaos: decoders reject garbage with their own named errors', () => {
  it('p2p frames and schemas, swarm tokens, signed manifests, safetensors, configs, model folders, task files', async () => {
    const figures = await runDecoderFuzz({ seed: SEED, casesPerTarget: LONG ? LONG_DECODER_CASES : SHORT_DECODER_CASES });
    expect(figures.findings).toEqual([]);
    expect(figures.unexpected_errors).toBe(0);
    // Each target saw both sides of its edge (model folders never load: their weights are not the model's).
    for (const [name, t] of Object.entries(figures.targets)) {
      expect(t.rejected, name).toBeGreaterThan(0);
      if (name !== 'worker:model-folder') expect(t.accepted, name).toBeGreaterThan(0);
    }
  });

  it('counts an error of the wrong name as a finding (the check can fail)', async () => {
    const findings: Finding[] = [];
    const t = await fuzzTarget(
      {
        name: 'broken',
        allowed: ['RangeError'],
        input: fc.integer(),
        decode: (n: number) => {
          if (n % 2 === 0) throw new TypeError('even');
          if (n % 3 === 0) throw new RangeError('allowed');
          return n;
        },
      },
      SEED,
      100,
      findings,
    );
    expect(t.unexpected).toBeGreaterThan(0);
    expect(t.rejected).toBeGreaterThan(0);
    expect(t.accepted).toBeGreaterThan(0);
    expect(findings[0].error).toMatch(/^TypeError/);
  });
});
