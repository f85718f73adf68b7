/**
 * Client-runner throughput and overhead: a trivial agent script (prints its reward, calls no model) run through
 * the whole runner path — begin over HTTP, snapshot, spawn in its own process group under the sandbox, parse,
 * end over HTTP, store — at concurrency 1, 8 and 32. The episode API is the runner's HTTP test double (it answers
 * like the real routes, see runner/episode-api-double.contract.test.ts, but hosts no model), so model time is
 * excluded by construction.
 *
 *   episodes_per_s     finished episodes per second of wall time
 *   runner_overhead_ms mean time per episode, begin → stored (the script does nothing, so this is all spawn +
 *                      bookkeeping; at concurrency > 1 it includes waiting for the CPU)
 *   process_ms         of which the script's process ran (node start-up under the sandbox dominates)
 *   bookkeeping_ms     runner_overhead_ms − process_ms: the runner's HTTP begin/end, snapshot, parse, store
 *   raw_spawn_ms       `node script.mjs` started directly, for comparison (no sandbox, no runner)
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EpisodeApi } from '../swarm/node/runner/episode-api.ts';
import { ClientRunner } from '../swarm/node/runner/runner.ts';
import { EpisodeApiDouble } from '../swarm/node/runner/testing/episode-api-double.ts';
import { formatTable, type BenchContext, type Row } from './report.ts';

const SCRIPT = 'console.log(JSON.stringify({ reward: 1 }));\n';
const LEVELS = [
  { concurrency: 1, episodes: 12 },
  { concurrency: 8, episodes: 48 },
  { concurrency: 32, episodes: 128 },
];

export default async function bench(ctx: BenchContext) {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-bench-runner-'));
  const double = await EpisodeApiDouble.start();
  try {
    const scriptFile = join(dir, 'trivial.mjs');
    writeFileSync(scriptFile, SCRIPT);
    const rawSpawnMs = meanMs(5, () => execFileSync(process.execPath, [scriptFile]));
    ctx.log(`raw spawn: ${rawSpawnMs.toFixed(1)} ms`);

    const rows: Row[] = [];
    const results: Record<string, { episodes_per_s: number; runner_overhead_ms: number; process_ms: number; bookkeeping_ms: number }> = {};
    for (const { concurrency, episodes } of LEVELS) {
      const runner = new ClientRunner({
        api: new EpisodeApi(double.swarmUrl, () => double.token),
        dataDir: dir,
        scriptsDir: join(dir, 'scripts'),
        maxConcurrency: concurrency,
      });
      const tasks = Array.from({ length: episodes }, (_, i) => ({ id: `t${i}` }));
      const started = performance.now();
      await runner.attach({ name: `c${concurrency}`, script: { path: scriptFile }, tasks: { inline: tasks }, model: 'tiny', epochs: 1, concurrency, retries: 0 });
      const status = await runner.settled(`c${concurrency}`);
      const wallS = (performance.now() - started) / 1000;
      const runs = runner.runs(`c${concurrency}`);
      await runner.close();
      const episodeMs = mean(runs.map((r) => Date.parse(r.endedAt!) - Date.parse(r.startedAt)));
      const processMs = mean(runs.map((r) => r.processMs ?? 0));
      const perS = status.counts.ended / wallS;
      results[`c${concurrency}`] = { episodes_per_s: perS, runner_overhead_ms: episodeMs, process_ms: processMs, bookkeeping_ms: episodeMs - processMs };
      rows.push({ concurrency, episodes: status.counts.ended, aborted: status.counts.aborted, wall_s: wallS, ...results[`c${concurrency}`] });
      ctx.log(`concurrency ${concurrency}: ${perS.toFixed(1)} episodes/s`);
    }
    process.stdout.write(formatTable(rows) + '\n');
    process.stdout.write(`raw_spawn_ms ${rawSpawnMs.toFixed(1)} (node started directly, no runner, no sandbox)\n`);
    const pick = (key: keyof (typeof results)[string]) => Object.fromEntries(Object.entries(results).map(([k, v]) => [k, v[key]]));
    return {
      raw_spawn_ms: rawSpawnMs,
      episodes_per_s: pick('episodes_per_s'),
      runner_overhead_ms: pick('runner_overhead_ms'),
      process_ms: pick('process_ms'),
      bookkeeping_ms: pick('bookkeeping_ms'),
    };
  } finally {
    await double.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
}

function meanMs(times: number, fn: () => unknown): number {
  const started = performance.now();
  for (let i = 0; i < times; i++) fn();
  return (performance.now() - started) / times;
}
