/**
 * Asynchronous training against synchronous, measured in one run: `npm run bench -- async [--json] [--steps N]
 * [--eval-tasks N] [--mini-batches K]` (K optimizer updates a step: more of the trainer's work per episode). The demo's job (held-out eval, GRPO training, eval again; swarm/node/demo/demo.ts) three
 * times with the same seeds, on an agent whose environment is slow — the calculator with 200 ms per tool call and
 * a long tail (5% of the tasks 10× slower; bench/agents/slow-calculator.ts):
 *
 *   sync     staleness 0, PPO: a ready batch drains the model (the straggler holds every agent), then it updates
 *   async-1  staleness 1, decoupled PPO: a sampler engine of its own serves the calls while the trainer updates;
 *            steps run while episodes go on, partial rollouts; the runners offer η + 1 batches of episodes at
 *            once and the admission gate holds what the bound does not allow
 *   async-2  staleness 2, decoupled PPO
 *
 * Per mode: train episodes per second (the held-out ones, which run before and after training, not counted), the
 * trainer's and the sampler's busy shares of the training wall time (the
 * asynchronous modes sample on an engine of their own, which runs while the trainer updates), wall seconds per step,
 * held-out success before and after the same number of steps, `drain_fraction` (the share of the training time
 * steps spent draining: waiting for the episodes in flight, the stall asynchronous training removes), the largest
 * policy lag trained on, episodes
 * dropped as stale, and `cpu_share`: the machine's busy share of all cores while training, every process counted
 * (/proc/stat: the sandboxed agents too, whose CPU time a process's own counters lose) — run it on a quiet machine;
 * near 1, the cores, not the waits, set the pace, and overlapping the waits gains little. `cpu_ms_per_episode` is
 * the same busy time over the train episodes (so `cores` × 1000 / it bounds the episodes per second), and `load_1m`
 * the machine's load average as training began, which says how quiet it was.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TrainLoss } from '../worker/common/engine.ts';
import { DEFAULT_DEMO, runDemo, type DemoResult } from '../swarm/node/demo/demo.ts';
import { DEFAULT_SCRIPTS } from '../swarm/node/demo/scenarios.ts';
import { dataPaths } from '../swarm/node/paths.ts';
import { listEpisodes } from '../swarm/node/store/episode-list.ts';
import { openStoreReadOnly } from '../swarm/node/store/read-only.ts';
import { type BenchContext, formatTable, type Row } from './report.ts';

const SLOW_AGENT = fileURLToPath(new URL('./agents/slow-calculator.ts', import.meta.url));

const MODES: { mode: string; staleness: number; loss: TrainLoss }[] = [
  { mode: 'sync', staleness: 0, loss: 'ppo' },
  { mode: 'async-1', staleness: 1, loss: 'decoupled-ppo' },
  { mode: 'async-2', staleness: 2, loss: 'decoupled-ppo' },
];

function argNumber(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

/** Episodes the batcher dropped as stale (their discard reason starts with the disposition). */
function droppedStale(result: DemoResult): number {
  const db = openStoreReadOnly(dataPaths(result.dataDir).store);
  try {
    return listEpisodes(db, { model: result.modelName, state: 'discarded', text: 'dropped-stale', limit: 1 }).total;
  } finally {
    db.close();
  }
}

/** The sampler's busy share over the steps' wall time (each step's share weighted by its phases' length). */
function samplerBusyFraction(records: DemoResult['stepRecords']): number {
  let busy = 0;
  let wall = 0;
  for (const step of records) {
    const ms = step.phases ? step.phases.rolloutMs + step.phases.drainMs + step.phases.updateMs : 0;
    busy += (step.samplerBusyShare ?? 0) * ms;
    wall += ms;
  }
  return wall > 0 ? busy / wall : 0;
}

/**
 * The share of the training wall time steps spent draining: from a ready batch to the update's start, while the
 * model finished the episodes in flight and admitted none (the straggler stall asynchronous training removes).
 */
function drainFraction(records: DemoResult['stepRecords']): number {
  const wallMs = (records.at(-1)?.wallS ?? 0) * 1000;
  const drainMs = records.reduce((a, r) => a + (r.phases?.drainMs ?? 0), 0);
  return wallMs > 0 ? drainMs / wallMs : 0;
}

/**
 * The machine's CPU time so far, busy and in all, in clock ticks over every core (/proc/stat's first line: user,
 * nice, system, idle, iowait, irq, softirq, steal).
 */
function machineTicks(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - fields[3] - fields[4], total };
}

/** /proc/stat counts in USER_HZ ticks: 100 a second on the Linux targets Node runs on. */
const MS_PER_TICK = 10;

export default async function asyncBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const steps = argNumber(ctx.args, '--steps', 10);
  const miniBatches = argNumber(ctx.args, '--mini-batches', 1);
  const evalTasks = argNumber(ctx.args, '--eval-tasks', 100);
  const rows: Row[] = [];
  for (const { mode, staleness, loss } of MODES) {
    const out = mkdtempSync(join(tmpdir(), `agentjet-bench-async-${mode}-`));
    ctx.log(`${mode}: eval ${evalTasks} held-out tasks, ${steps} steps, eval again …`);
    let ticksFrom = machineTicks();
    let busyShare = 0;
    let busyMs = 0;
    let load = loadavg()[0];
    const result = await runDemo({ ...DEFAULT_DEMO, steps, evalTasks, out, script: SLOW_AGENT, bundle: true, reward: DEFAULT_SCRIPTS.calculator.reward, staleness, loss, miniBatches }, (p) => {
      if (p.phase === 'train-start') {
        ticksFrom = machineTicks();
        load = loadavg()[0];
      }
      if (p.phase === 'train') {
        const ticks = machineTicks();
        busyShare = (ticks.busy - ticksFrom.busy) / Math.max(1, ticks.total - ticksFrom.total);
        busyMs = (ticks.busy - ticksFrom.busy) * MS_PER_TICK;
        ctx.log(`${mode}: step ${p.step}/${p.total} (${p.record.wallS.toFixed(0)} s)`);
      }
    });
    const records = result.stepRecords;
    const trainWallS = records.at(-1)?.wallS ?? 0;
    const trainerS = records.reduce((a, r) => a + r.metrics.timeMs / 1000, 0);
    // The demo's count includes the held-out episodes, which ran outside the training time.
    const trainEpisodes = result.episodes - result.evalBefore.episodes - result.evalAfter.episodes;
    rows.push({
      mode,
      staleness,
      loss,
      steps: result.steps,
      episodes: trainEpisodes,
      episodes_per_s: trainWallS > 0 ? round(trainEpisodes / trainWallS) : 0,
      trainer_busy_fraction: trainWallS > 0 ? round(trainerS / trainWallS) : 0,
      sampler_busy_fraction: round(samplerBusyFraction(records)),
      drain_fraction: round(drainFraction(records)),
      cpu_share: round(busyShare),
      cpu_ms_per_episode: Math.round(busyMs / Math.max(1, trainEpisodes)),
      cores: availableParallelism(),
      load_1m: round(load),
      step_wall_s: round(trainWallS / Math.max(1, result.steps)),
      eval_before: result.eval_before,
      eval_after: result.eval_after,
      max_lag: Math.max(0, ...records.map((r) => r.policyLagMax ?? 0)),
      dropped_stale: droppedStale(result),
    });
  }
  const sync = rows[0];
  for (const row of rows) row.speedup = round(Number(row.episodes_per_s) / Math.max(1e-9, Number(sync.episodes_per_s)));
  process.stdout.write(
    `async: the calculator agent with 200 ms per tool call and 5% of tasks 10× slower; ${steps} steps${miniBatches > 1 ? ` of ${miniBatches} updates` : ''}; ${evalTasks} held-out tasks; same seeds\n`,
  );
  process.stdout.write(formatTable(rows) + '\n');
  return { modes: rows, steps, miniBatches, evalTasks };
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
