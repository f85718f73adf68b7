/**
 * `agentjet runs` on a data dir seeded with two runs through the store's own functions (and once on a real peer's
 * data dir, while it runs and after it stopped): exit codes, error names, JSON shapes, the steps export against the
 * store, and the episode export's run window and filters.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunComparison, RunDetail, RunEvalPoint, RunSummary, RunTaskRow } from '../../common/runs-api.ts';
import type { EpisodeExport } from '../../common/timeline/export.ts';
import { PeerRuntime } from '../runtime.ts';
import { SEEDED, seedRuns } from '../report/testing/seed-runs.ts';
import { getRun, iterateRunSteps } from '../store/training-runs.ts';
import { runEpisode } from '../training/testing/peer-agent.ts';
import { stepsCsv } from '../training/run-export.ts';
import { main } from './main.ts';
import { openOfflineStore } from './offline-store.ts';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-runs-cli-'));
  dirs.push(dir);
  return dir;
};
let dataDir: string;

beforeAll(() => {
  dataDir = tempDir();
  seedRuns(dataDir);
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** How many times stdout was written to (one per exported line when it streams). */
  writes: number;
}

/** `agentjet runs …` in this process through main() (so exit codes and error printing are the CLI's own). */
async function cli(args: string[], dir = dataDir): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  let writes = 0;
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    writes++;
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  });
  try {
    const code = await main(['runs', ...args, '--data-dir', dir]);
    return { code, stdout, stderr, writes };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const json = async <T>(args: string[], dir?: string): Promise<T> => {
  const run = await cli([...args, '--json'], dir);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as T;
};

const episodesOf = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as EpisodeExport);

describe('agentjet runs on a stopped peer’s data dir', () => {
  it('lists runs newest first, as JSON and as a table, with --limit', async () => {
    const all = await json<{ runs: RunSummary[]; total: number }>(['list']);
    expect(all.total).toBe(2);
    expect(all.runs.map((r) => [r.id, r.steps, r.lastStep])).toEqual([
      ['tiny-2', 3, 3],
      ['tiny-1', 5, 5],
    ]);
    expect(all.runs[1].lastEval).toMatchObject({ step: 5, episodes: SEEDED.evalPerPoint });
    const one = await json<{ runs: RunSummary[]; total: number }>(['list', '--limit', '1']);
    expect(one.runs.map((r) => r.id)).toEqual(['tiny-2']);
    expect(one.total).toBe(2);
    const table = await cli(['list']);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n').filter((l) => l.startsWith('tiny-')).length).toBe(2);
  });

  it('shows a run: detail, held-out evals and the per-task table', async () => {
    const shown = await json<{ run: RunDetail; evals: RunEvalPoint[]; tasks: RunTaskRow[] }>(['show', 'tiny-1']);
    expect(shown.run).toMatchObject({ id: 'tiny-1', status: 'stopped', seed: 7, configHash: 'hash-tiny-1', stepOffset: 0 });
    expect(shown.run.changedFromDefaults).toContain('checkpointEvery');
    expect(shown.evals.map((e) => e.step)).toEqual([0, 5]);
    expect(new Set(shown.tasks.map((t) => t.kind))).toEqual(new Set(['train', 'eval']));
    expect(shown.run.checkpoints.map((c) => c.step)).toEqual([5]);
    expect((await cli(['show', 'tiny-2'])).code).toBe(0);
  });

  it('compares runs: the differing keys and each run', async () => {
    const comparison = await json<RunComparison>(['compare', 'tiny-1', 'tiny-2']);
    expect(comparison.runs.map((r) => r.id)).toEqual(['tiny-1', 'tiny-2']);
    expect(comparison.differingKeys).toEqual(['train.learningRate']);
    expect((await cli(['compare', 'tiny-2', 'tiny-1'])).code).toBe(0);
  });

  it('exports every step as CSV equal to the store’s, written whole to --out', async () => {
    const file = join(tempDir(), 'steps.csv');
    const run = await cli(['export', 'tiny-2', '--out', file]);
    expect(run.code, run.stderr).toBe(0);
    const db = openOfflineStore(dataDir);
    try {
      const expected = [...stepsCsv(iterateRunSteps(db, getRun(db, 'tiny-2')!))].join('');
      const text = readFileSync(file, 'utf8');
      expect(text).toBe(expected);
      const [header, ...rows] = text.trim().split('\n');
      expect(rows.length).toBe(SEEDED.steps['tiny-2']);
      const column = (name: string) => rows.map((r) => r.split(',')[header.split(',').indexOf(name)]);
      expect(column('step')).toEqual(['1', '2', '3']);
      expect(column('model_step')).toEqual(['6', '7', '8']);
      expect(column('reward_mean').map(Number)).toEqual([0.1, 0.2, 0.1 * 3]);
    } finally {
      db.close();
    }
    expect(readdirSync(join(file, '..'))).toEqual(['steps.csv']);
  });

  it('exports steps as JSONL to stdout', async () => {
    const run = await cli(['export', 'tiny-1', '--steps', 'jsonl']);
    expect(run.code).toBe(0);
    const steps = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { runStep: number; runId: string });
    expect(steps.map((s) => [s.runStep, s.runId])).toEqual([1, 2, 3, 4, 5].map((n) => [n, 'tiny-1']));
  });

  it('exports the run’s episodes (its window only), streamed line by line, with filters', async () => {
    const all = await cli(['export', 'tiny-1', '--episodes']);
    expect(all.code, all.stderr).toBe(0);
    const records = episodesOf(all.stdout);
    const perRun = 2 * SEEDED.evalPerPoint + SEEDED.steps['tiny-1'] * SEEDED.trainPerStep;
    expect(records.length).toBe(perRun);
    expect(records.every((r) => r.episode.id.startsWith('tiny-1-'))).toBe(true);
    // One write per episode: nothing is collected before it is written.
    expect(all.writes).toBe(perRun);

    const ids = async (...filters: string[]) => episodesOf((await cli(['export', 'tiny-1', '--episodes', ...filters])).stdout).map((r) => r.episode.id);
    expect(await ids('--step', '2')).toEqual([0, 1, 2, 3].map((i) => `tiny-1-s2-${i}`));
    expect((await ids('--kind', 'eval')).length).toBe(2 * SEEDED.evalPerPoint);
    expect(await ids('--version', '0', '--kind', 'train')).toEqual([0, 1, 2, 3].map((i) => `tiny-1-s1-${i}`));
    expect((await ids('--client', 'calc-a')).length).toBe((SEEDED.steps['tiny-1'] * SEEDED.trainPerStep) / 2);
    expect((await ids('--state', 'trained')).length).toBe(SEEDED.steps['tiny-1'] * SEEDED.trainPerStep);
    expect(await ids('--state', 'aborted')).toEqual([]);
    // Step numbers are the run's own: tiny-2's step 1 is model step 6.
    expect(episodesOf((await cli(['export', 'tiny-2', '--episodes', '--step', '1'])).stdout).map((r) => r.episode.id)).toEqual(
      [0, 1, 2, 3].map((i) => `tiny-2-s1-${i}`),
    );
  });

  it('exports steps and episodes together into a folder', async () => {
    const dir = join(tempDir(), 'both');
    const run = await cli(['export', 'tiny-1', '--steps', 'jsonl', '--episodes', '--kind', 'eval', '--out', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(['tiny-1-episodes.jsonl', 'tiny-1-steps.jsonl']);
    expect(episodesOf(readFileSync(join(dir, 'tiny-1-episodes.jsonl'), 'utf8')).length).toBe(2 * SEEDED.evalPerPoint);
  });

  it('writes a run’s report folder', async () => {
    const dir = join(tempDir(), 'report');
    const run = await cli(['report', 'tiny-1', '--out', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(existsSync(join(dir, 'report.md'))).toBe(true);
    expect(existsSync(join(dir, 'eval.svg'))).toBe(true);
  });

  it('answers bad usage with exit 2', async () => {
    for (const args of [
      [],
      ['bogus'],
      ['list', 'tiny-1'],
      ['list', '--limit', '0'],
      ['list', '--limit', 'many'],
      ['list', '--steps', 'csv'],
      ['show'],
      ['show', 'tiny-1', 'tiny-2'],
      ['show', '../etc'],
      ['show', 'tiny-1', '--out', 'x'],
      ['compare', 'tiny-1'],
      ['compare', 'tiny-1', 'tiny-1'],
      ['compare', ...Array.from({ length: 9 }, (_, i) => `r-${i}`)],
      ['export', 'tiny-1', '--steps', 'xml'],
      ['export', 'tiny-1', '--step', '2'],
      ['export', 'tiny-1', '--episodes', '--state', 'done'],
      ['export', 'tiny-1', '--episodes', '--kind', 'test'],
      ['export', 'tiny-1', '--episodes', '--step', '-1'],
      ['export', 'tiny-1', '--episodes', '--version', '1.5'],
      ['export', 'tiny-1', '--episodes', '--steps', 'csv'],
      ['export', 'tiny-1', '--json'],
      ['report', 'tiny-1', '--json'],
    ]) {
      const run = await cli(args);
      expect(run.code, args.join(' ')).toBe(2);
    }
  });

  it('names an unknown run (RunNotFoundError, exit 1) and a data dir without a store (NoPeerDataError)', async () => {
    for (const args of [['show', 'tiny-9'], ['compare', 'tiny-1', 'tiny-9'], ['export', 'tiny-9'], ['report', 'tiny-9', '--out', join(tempDir(), 'r')]]) {
      const run = await cli(args);
      expect(run.code, args.join(' ')).toBe(1);
      expect(run.stderr).toContain('RunNotFoundError');
    }
    const empty = await cli(['list'], tempDir());
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('NoPeerDataError');
  });
});

describe('agentjet runs on a running peer’s data dir', () => {
  it('reads the run a peer trains while it runs, and after it stopped', async () => {
    const dir = tempDir();
    const runtime = await PeerRuntime.start({
      dataDir: dir,
      port: 0,
      consoleLogLevel: 'silent',
      models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 16 }],
      training: { config: { batchTasks: 2, groupSize: 2, checkpointEvery: 0 } },
    });
    try {
      for (const [task, reward] of [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const) await runEpisode(runtime, task, reward);
      await runtime.training.loop('tiny').whenSettled();
      const live = await json<{ runs: RunSummary[] }>(['list'], dir);
      expect(live.runs.map((r) => [r.id, r.status, r.steps])).toEqual([['tiny-1', 'running', 1]]);
      const csv = await cli(['export', 'tiny-1'], dir);
      expect(csv.code, csv.stderr).toBe(0);
      expect(csv.stdout.trim().split('\n').length).toBe(2);
      expect(episodesOf((await cli(['export', 'tiny-1', '--episodes', '--step', '1'], dir)).stdout).length).toBe(4);
    } finally {
      await runtime.stop();
    }
    const shown = await json<{ run: RunDetail }>(['show', 'tiny-1'], dir);
    expect(shown.run).toMatchObject({ id: 'tiny-1', status: 'stopped', steps: 1 });
    expect((await cli(['report', 'tiny-1', '--out', join(dir, 'report')], dir)).code).toBe(0);
  }, 120_000);
});
