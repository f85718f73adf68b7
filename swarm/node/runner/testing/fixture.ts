/** Test fixture: a runner wired to the episode-API test double, with a data dir holding fake secrets. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import type { AttachClientRequest, RunnerEvent } from '../../../common/runner-api.ts';
import { EpisodeApi } from '../episode-api.ts';
import { ClientRunner, type ClientRunnerOptions } from '../runner.ts';
import { EpisodeApiDouble } from './episode-api-double.ts';

export function useRunnerFixture() {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(options: Partial<ClientRunnerOptions> = {}) {
    const double = await EpisodeApiDouble.start();
    const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-runner-'));
    writeFileSync(join(dataDir, 'identity.json'), JSON.stringify({ secret: 'node-secret-value' }), { mode: 0o600 });
    writeFileSync(join(dataDir, 'control.json'), JSON.stringify({ token: 'control-token-value' }), { mode: 0o600 });
    const events: RunnerEvent[] = [];
    const runner = new ClientRunner({
      api: new EpisodeApi(double.swarmUrl, () => double.token),
      dataDir,
      scriptsDir: join(dataDir, 'scripts'),
      retryBaseMs: 10,
      broadcast: (e) => events.push(e),
      ...options,
    });
    cleanups.push(() => double.close(), () => runner.close());
    return { double, runner, dataDir, events };
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
  return { setup, attachInline };
}
