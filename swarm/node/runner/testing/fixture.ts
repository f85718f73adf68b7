/**
 * Test fixture: a runner wired to the REAL episode routes (testing/episode-server.ts: builtin:tiny, real store,
 * real HTTP), started once per test file on first use and shared by its tests (each test has its own runner and
 * reads only its own runs), or to the episode-API double when a test injects failures. The data dir holds fake
 * secrets for the isolation tests.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach } from 'vitest';
import type { AttachClientRequest, ClientRunRecord, RunnerEvent } from '../../../common/runner-api.ts';
import { EpisodeApi } from '../episode-api.ts';
import { ClientRunner, type ClientRunnerOptions } from '../runner.ts';
import { EpisodeApiDouble } from './episode-api-double.ts';
import { startEpisodeServer, type EpisodeServer } from './episode-server.ts';

/** Retries in tests back off briefly: the behaviour is the same, the suite is not slower for it. */
const TEST_RETRY_BASE_MS = 10;

export function useRunnerFixture() {
  const cleanups: (() => Promise<void>)[] = [];
  let server: Promise<EpisodeServer> | undefined;
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  afterAll(async () => {
    await (await server)?.close();
  });

  function dataDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'agentjet-runner-'));
    writeFileSync(join(dir, 'identity.json'), JSON.stringify({ secret: 'node-secret-value' }), { mode: 0o600 });
    writeFileSync(join(dir, 'control.json'), JSON.stringify({ token: 'control-token-value' }), { mode: 0o600 });
    return dir;
  }

  function runnerFor(api: EpisodeApi, dir: string, options: Partial<ClientRunnerOptions>) {
    const events: RunnerEvent[] = [];
    const runner = new ClientRunner({ api, dataDir: dir, scriptsDir: join(dir, 'scripts'), retryBaseMs: TEST_RETRY_BASE_MS, broadcast: (e) => events.push(e), ...options });
    cleanups.push(() => runner.close());
    return { runner, events };
  }

  /** A runner against the real episode routes. */
  async function setup(options: Partial<ClientRunnerOptions> = {}) {
    server ??= startEpisodeServer();
    const real = await server;
    const dir = dataDir();
    const api = new EpisodeApi(real.swarmUrl, () => real.token);
    return { server: real, api, dataDir: dir, ...runnerFor(api, dir, options) };
  }

  /** A runner against the double, to inject failures the real routes cannot be made to produce on demand. */
  async function setupWithDouble(options: Partial<ClientRunnerOptions> = {}) {
    const double = await EpisodeApiDouble.start();
    cleanups.push(() => double.close());
    const dir = dataDir();
    return { double, dataDir: dir, ...runnerFor(new EpisodeApi(double.swarmUrl, () => double.token), dir, options) };
  }

  function attachInline(runner: ClientRunner, name: string, filename: string, content: string, extra: Partial<AttachClientRequest> = {}) {
    return runner.attach({
      name,
      script: { content, filename },
      tasks: { inline: [{ id: 't1', question: 'two plus two' }] },
      model: 'tiny',
      epochs: 1,
      retries: 0,
      ...extra,
    });
  }
  return { setup, setupWithDouble, attachInline };
}

/** Resolves once `n` runs matching `match` were recorded (from now on). */
export function waitForRuns(runner: ClientRunner, match: (r: ClientRunRecord) => boolean, n: number): Promise<ClientRunRecord[]> {
  return new Promise((resolve) => {
    const seen: ClientRunRecord[] = [];
    const off = runner.onRun((r) => {
      if (match(r) && seen.push(r) >= n) {
        off();
        resolve(seen);
      }
    });
  });
}

/** Resolves once `predicate` holds for the runner's state (checked at every change). */
export function waitForState(runner: ClientRunner, predicate: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (predicate()) return resolve();
    const off = runner.onChange(() => {
      if (!predicate()) return;
      off();
      resolve();
    });
  });
}
