/** The shell's event connection against a real peer runtime (in process, loopback, no models). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { StatusPayload } from '../swarm/common/api.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import { watchPeerEvents, type PeerEvents } from './peer-events.ts';
import type { DesktopNotice } from './run-notices.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startRuntime(): Promise<PeerRuntime> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'agentjet-shell-events-'));
  const runtime = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'silent' });
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => runtime.stop());
  return runtime;
}

async function until(condition: () => boolean, what: string) {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
}

function watch(runtime: PeerRuntime, token = runtime.token) {
  const statuses: (StatusPayload | null)[] = [];
  const notices: DesktopNotice[] = [];
  const warnings: string[] = [];
  const events: PeerEvents = watchPeerEvents({
    apiUrl: runtime.urls.api,
    token,
    onStatus: (status) => statuses.push(status),
    onNotice: (notice) => notices.push(notice),
    onWarning: (message) => warnings.push(message),
  });
  cleanups.push(() => events.close());
  return { statuses, notices, warnings };
}

describe('peer events in the shell', () => {
  it('follows the status, notifies an opened circuit breaker, and reports offline when the peer goes', async () => {
    const runtime = await startRuntime();
    const seen = watch(runtime);
    await until(() => seen.statuses.some((s) => s?.nodeId === runtime.identity.nodeId), 'the first status');

    runtime.events.broadcast({ type: 'client-paused', data: { name: 'calc', reason: 'failed 5 times in a row', breaker: true } });
    await until(() => seen.notices.length > 0, 'the breaker notice');
    expect(seen.notices).toEqual([{ title: 'Client calc stopped: circuit breaker open', body: 'failed 5 times in a row', view: 'clients' }]);

    await runtime.stop();
    await until(() => seen.statuses.at(-1) === null, 'the offline status');
  });

  it('never connects with a wrong token (the peer refuses it), and stays quiet', async () => {
    const runtime = await startRuntime();
    const seen = watch(runtime, 'wrong-token');
    await until(() => seen.statuses.length > 0, 'a status report');
    expect(seen.statuses.every((status) => status === null)).toBe(true);
  });

  it('asks for the training state after a step; a model without a loop here is no error', async () => {
    const runtime = await startRuntime();
    const seen = watch(runtime);
    await until(() => seen.statuses.length > 0, 'the first status');
    const metrics = { loss: 0, kl: 0, clipFraction: 0, entropy: 0, gradNorm: 0, tokens: 1, trainedTokens: 1, microBatches: 1, timeMs: 1 };
    runtime.events.broadcast({
      type: 'train-step',
      data: { model: 'elsewhere', step: 1, policyVersion: 1, time: new Date().toISOString(), groups: 1, episodes: 2, samples: 2, rewardMean: 0, metrics, checkpoint: null },
    });
    // Notices follow their events in order, each event's training read done first: once the marker's notice is
    // here, the step's read of 'elsewhere' has been answered (404) and said all it was going to say.
    runtime.events.broadcast({ type: 'client-paused', data: { name: 'marker', reason: 'r', breaker: true } });
    await until(() => seen.notices.length > 0, 'the marker notice');
    expect(seen.warnings).toEqual([]);
    expect(seen.notices.map((n) => n.title)).toEqual(['Client marker stopped: circuit breaker open']);
  });
});
