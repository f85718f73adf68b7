/**
 * Refused starts under back-pressure: a runner (concurrency SLOTS) against a server that answers begins with 503 and
 * Retry-After for a while (the episode-API double injects it; runner/testing/episode-api-double.contract.test.ts
 * checks the double answers like the real routes). Figures: refused starts per client per Retry-After once the first
 * burst (one per slot already asking) is answered, and whether any refused start became a run row or a failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EpisodeApi } from '../../runner/episode-api.ts';
import { ClientRunner } from '../../runner/runner.ts';
import { EpisodeApiDouble } from '../../runner/testing/episode-api-double.ts';

const SLOTS = 8;
/** One burst of SLOTS, then probes once per Retry-After: a few seconds. */
const REFUSALS = 12;
const RETRY_AFTER_S = 1;
const TASKS = 16;

export interface BackPressureFigures {
  refused_starts: number;
  refused_starts_per_s_max: number;
  refused_run_rows: number;
  refused_breaker_trips: number;
}

/** The most timestamps within any `windowMs`. */
function mostWithin(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j] - sorted[i] >= windowMs) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

export async function runBackPressureChaos(): Promise<BackPressureFigures> {
  const double = await EpisodeApiDouble.start();
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-chaos-backpressure-'));
  const runner = new ClientRunner({ api: new EpisodeApi(double.swarmUrl, () => double.token), dataDir: dir, scriptsDir: join(dir, 'scripts') });
  try {
    double.failBegins(REFUSALS, { kind: 'busy', status: 503, retryAfterS: RETRY_AFTER_S });
    await runner.attach({
      name: 'patient',
      script: { content: 'console.log(JSON.stringify({ reward: 1 }));\n', filename: 'agent.mjs' },
      tasks: { inline: Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}` })) },
      model: 'tiny',
      epochs: 1,
      retries: 0,
      concurrency: SLOTS,
      maxConsecutiveFailures: 1,
    });
    const status = await runner.settled('patient');
    const refused = double.begins.filter((b) => b.status === 503).map((b) => b.at);
    return {
      refused_starts: refused.length,
      refused_starts_per_s_max: mostWithin(refused.slice(SLOTS), RETRY_AFTER_S * 1000),
      refused_run_rows: runner.runs('patient').length - TASKS,
      refused_breaker_trips: status.state === 'broken' ? 1 : 0,
    };
  } finally {
    await runner.close();
    await double.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
