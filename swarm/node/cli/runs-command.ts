/**
 * `agentjet runs list | show RUN | compare RUN RUN […] | export RUN | report RUN`: a data dir's training runs
 * (swarm/common/runs-api.ts). Every subcommand reads the store file read-only (offline-store.ts), whether a peer
 * runs on the data dir or not: the store is in WAL mode, so a reader never blocks the peer's writes, and a stopped
 * peer's runs read the same as a running one's.
 */
import { createWriteStream, mkdirSync, renameSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import type { Database } from 'better-sqlite3';
import { MAX_COMPARED_RUNS, runIdSchema } from '../../common/runs-api.ts';
import { episodeKindSchema, episodeStateSchema, type EpisodeKind, type EpisodeState } from '../../common/timeline/export.ts';
import { exportTokenizer } from '../episodes/control-routes.ts';
import { readRunReport } from '../report/run-report-data.ts';
import { writeRunReport } from '../report/run-report.ts';
import { runCompareText, runShowText, runsListText } from '../report/run-text.ts';
import { exportEpisodes } from '../store/episode-export.ts';
import type { EpisodeSelection } from '../store/episode-list.ts';
import { iterateRunSteps, listRuns, runEvals, runTasks, runWindow, type TrainingRunRow } from '../store/training-runs.ts';
import { STEP_EXPORT_FORMATS, stepsCsv, stepsJsonl, type StepExportFormat } from '../training/run-export.ts';
import { compareRuns, requireRun, runDetail, runSummary } from '../training/run-views.ts';
import { UsageError, type Command, type OptionValues } from './command.ts';
import { dataDirOf, openOfflineStore } from './offline-store.ts';
import { dataDirOption } from './peer-client.ts';

/** The newest table the run reads touch (training_runs, migration 9). */
const RUNS_SCHEMA_VERSION = 9;
/** `list --limit`: the default fits a terminal screen; the most is the control API's page size. */
const LIST_DEFAULT = 50;
const LIST_MAX = 1000;
/** Rows of `show`'s per-task table (the most-run tasks of each split). */
const SHOW_TASKS_MAX = 50;

const SUBCOMMANDS = ['list', 'show', 'compare', 'export', 'report'] as const;
type Subcommand = (typeof SUBCOMMANDS)[number];
const STATES = episodeStateSchema.options;
const KINDS = episodeKindSchema.options;
const EPISODE_FILTER_FLAGS = ['step', 'version', 'client', 'state', 'kind'] as const;

/** The flags each subcommand takes (besides --data-dir); any other given flag is a usage error. */
const FLAGS_OF: Record<Subcommand, readonly string[]> = {
  list: ['json', 'limit'],
  show: ['json'],
  compare: ['json'],
  export: ['steps', 'episodes', 'out', ...EPISODE_FILTER_FLAGS],
  report: ['out'],
};

const USAGE = `agentjet runs list [--limit N] [--json]
             | show RUN [--json]
             | compare RUN RUN [RUN…] [--json]
             | export RUN [--steps csv|jsonl] [--episodes [--step N] [--version V] [--client C] [--state S] [--kind K]] [--out FILE]
             | report RUN [--out DIR]

A data dir's training runs, read from its store (a running peer's or a stopped one's).

  list          id, name, model, status, steps, best/last batch reward, last held-out eval, started, duration
                (newest first; --limit N: at most N, default ${LIST_DEFAULT}, at most ${LIST_MAX})
  show RUN      status, start point, seed, config hash, the resolved configuration (keys changed from the
                defaults marked), warnings, events, checkpoints, scripts, per-task table, held-out evals
  compare A B…  2 to ${MAX_COMPARED_RUNS} runs side by side: results, then the configuration with the differing keys first
  export RUN    --steps csv|jsonl   every step (default: csv, when --episodes is not given)
                --episodes          the run's episodes as JSONL exports (agentjet.episode/1), oldest first, streamed;
                                    filters: --step N (the episodes run step N trained on), --version V (policy
                                    version), --client C, --state ${STATES.join('|')}, --kind ${KINDS.join('|')}
                --out FILE          write FILE whole (a temporary name, then renamed) instead of stdout; with both
                                    --steps and --episodes, --out is a folder: RUN-steps.csv|jsonl, RUN-episodes.jsonl
  report RUN    report.md with SVG plots (rewards, success, held-out eval, loss, KL, clip, entropy, grad norm,
                response length, discarded groups, tokens/s, merge savings, calls), the configuration, events and
                per-task table; --out DIR (default runs/RUN-report)

Options:
  --data-dir DIR    the peer's data folder (default: AGENTJET_DATA_DIR, else the platform's app-data folder)
  --json            list/show/compare: print JSON (list: {runs, total}; show: {run, evals, tasks}; compare: {runs, differingKeys})`;

export const runsCommand: Command = {
  name: 'runs',
  summary: 'list, show, compare, export and report training runs, of a running or stopped peer',
  usage: USAGE,
  options: {
    ...dataDirOption,
    json: { type: 'boolean' },
    limit: { type: 'string' },
    steps: { type: 'string' },
    episodes: { type: 'boolean' },
    step: { type: 'string' },
    version: { type: 'string' },
    client: { type: 'string' },
    state: { type: 'string' },
    kind: { type: 'string' },
    out: { type: 'string' },
  },
  positionals: { min: 1, max: 1 + MAX_COMPARED_RUNS, names: `a subcommand: ${SUBCOMMANDS.join(', ')}` },
  async run(values, [subText, ...ids]) {
    const sub = subcommandOf(subText);
    refuseFlags(values, sub);
    if (sub === 'list') {
      if (ids.length > 0) throw new UsageError(`list takes no run id, got "${ids[0]}"`);
      const limit = intFlag(values, 'limit', 1, LIST_MAX) ?? LIST_DEFAULT;
      return withStore(values, (db) => list(values, db, limit));
    }
    if (sub === 'compare') {
      const runIds = ids.map(runIdOf);
      if (runIds.length < 2 || runIds.length > MAX_COMPARED_RUNS) throw new UsageError(`compare takes 2 to ${MAX_COMPARED_RUNS} run ids, got ${runIds.length}`);
      const twice = runIds.find((id, i) => runIds.indexOf(id) !== i);
      if (twice) throw new UsageError(`run "${twice}" is named twice; compare distinct runs`);
      return withStore(values, (db) => print(values, compareRuns(db, runIds), (c) => runCompareText(c)));
    }
    if (ids.length !== 1) throw new UsageError(ids.length === 0 ? `${sub} needs a run id (\`agentjet runs list\` lists them)` : `${sub} takes one run id, got ${ids.length}`);
    const id = runIdOf(ids[0]);
    if (sub === 'show') {
      return withStore(values, (db) => {
        const run = requireRun(db, id);
        const shown = { run: runDetail(db, run), evals: runEvals(db, run), tasks: runTasks(db, run, SHOW_TASKS_MAX) };
        return print(values, shown, (s) => runShowText(s.run, s.evals, s.tasks));
      });
    }
    if (sub === 'report') {
      const dir = resolve(stringFlag(values, 'out') ?? join('runs', `${id}-report`));
      return withStore(values, (db) => {
        const written = writeRunReport(readRunReport(db, id), dir);
        process.stdout.write(`wrote ${written.report} (${written.files.length - 1} plots)\n`);
        return 0;
      });
    }
    const plan = exportPlanOf(values);
    return withStore(values, (db) => exportRun(db, requireRun(db, id), plan));
  },
};

function subcommandOf(text: string): Subcommand {
  if (!(SUBCOMMANDS as readonly string[]).includes(text)) throw new UsageError(`unknown subcommand "${text}"; use one of ${SUBCOMMANDS.join(', ')}`);
  return text as Subcommand;
}

function runIdOf(text: string): string {
  const parsed = runIdSchema.safeParse(text);
  if (!parsed.success) throw new UsageError(`"${text}" is not a run id: letters, digits, ".", "_" and "-", as \`agentjet runs list\` prints them`);
  return parsed.data;
}

function refuseFlags(values: OptionValues, sub: Subcommand): void {
  const allowed = new Set(['data-dir', ...FLAGS_OF[sub]]);
  const given = Object.keys(values).filter((flag) => values[flag] !== undefined && !allowed.has(flag));
  if (given.length > 0) {
    const takes = FLAGS_OF[sub].length > 0 ? FLAGS_OF[sub].map((f) => `--${f}`).join(', ') : 'no flags but --data-dir';
    throw new UsageError(`${given.map((f) => `--${f}`).join(', ')} ${given.length > 1 ? 'do' : 'does'} not apply to ${sub} (it takes ${takes})`);
  }
}

function stringFlag(values: OptionValues, flag: string): string | undefined {
  const value = values[flag];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${flag} needs a value`);
  return value;
}

function intFlag(values: OptionValues, flag: string, min: number, max: number): number | undefined {
  const text = stringFlag(values, flag);
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d{1,15}$/.test(text) || n < min || n > max) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max}, got "${text}"`);
  return n;
}

function oneOf<T extends string>(values: OptionValues, flag: string, allowed: readonly T[]): T | undefined {
  const text = stringFlag(values, flag);
  if (text === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(text)) throw new UsageError(`--${flag} must be one of ${allowed.join(', ')}, got "${text}"`);
  return text as T;
}

/** Opens the data dir's store read-only for one subcommand and closes it after. */
async function withStore(values: OptionValues, use: (db: Database) => number | Promise<number>): Promise<number> {
  const db = openOfflineStore(dataDirOf(values), { minSchemaVersion: RUNS_SCHEMA_VERSION });
  try {
    return await use(db);
  } finally {
    db.close();
  }
}

function print<T>(values: OptionValues, value: T, text: (value: T) => string): number {
  process.stdout.write(values.json ? `${JSON.stringify(value, null, 2)}\n` : `${text(value)}\n`);
  return 0;
}

function list(values: OptionValues, db: Database, limit: number): number {
  const page = listRuns(db, { limit, offset: 0 });
  const runs = page.runs.map((r) => runSummary(db, r));
  return print(values, { runs, total: page.total }, (p) => runsListText(p.runs, p.total));
}

interface EpisodeFilters {
  step?: number;
  policyVersion?: number;
  client?: string;
  state?: EpisodeState;
  kind?: EpisodeKind;
}

interface ExportPlan {
  steps: StepExportFormat | null;
  episodes: EpisodeFilters | null;
  out: string | undefined;
}

function exportPlanOf(values: OptionValues): ExportPlan {
  const stepsFormat = oneOf(values, 'steps', STEP_EXPORT_FORMATS);
  const wantsEpisodes = values.episodes === true;
  const filterGiven = EPISODE_FILTER_FLAGS.filter((f) => values[f] !== undefined);
  if (!wantsEpisodes && filterGiven.length > 0) throw new UsageError(`${filterGiven.map((f) => `--${f}`).join(', ')} filter episodes: add --episodes`);
  const out = stringFlag(values, 'out');
  if (stepsFormat && wantsEpisodes && !out) throw new UsageError('--steps and --episodes together need --out DIR (a folder for both files); or export them one at a time');
  const episodes: EpisodeFilters | null = wantsEpisodes
    ? withoutUndefined({
        step: intFlag(values, 'step', 1, Number.MAX_SAFE_INTEGER),
        policyVersion: intFlag(values, 'version', 0, Number.MAX_SAFE_INTEGER),
        client: stringFlag(values, 'client'),
        state: oneOf(values, 'state', STATES),
        kind: oneOf(values, 'kind', KINDS),
      })
    : null;
  return { steps: stepsFormat ?? (wantsEpisodes ? null : 'csv'), episodes, out };
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** The run's episodes as export selection: its window of the model's episodes, narrowed by the filters. */
export function runEpisodeSelection(db: Database, run: TrainingRunRow, filters: EpisodeFilters): EpisodeSelection {
  const window = runWindow(db, run);
  return withoutUndefined({
    model: run.model,
    createdFrom: window.from,
    createdBefore: window.before ?? undefined,
    trainStep: filters.step === undefined ? undefined : { model: run.model, step: run.stepOffset + filters.step },
    policyVersion: filters.policyVersion,
    client: filters.client,
    state: filters.state,
    kind: filters.kind,
  });
}

async function exportRun(db: Database, run: TrainingRunRow, plan: ExportPlan): Promise<number> {
  const both = plan.steps !== null && plan.episodes !== null;
  if (both) mkdirSync(resolve(plan.out!), { recursive: true });
  const stepsLines = (format: StepExportFormat) => (format === 'csv' ? stepsCsv(iterateRunSteps(db, run)) : stepsJsonl(iterateRunSteps(db, run)));
  const episodeLines = function* (filters: EpisodeFilters): Generator<string> {
    const records = exportEpisodes(db, runEpisodeSelection(db, run, filters), (model) => exportTokenizer(undefined, model));
    for (const record of records) yield `${JSON.stringify(record)}\n`;
  };
  const outputs: { lines: Iterable<string>; file: string | undefined; what: string }[] = [];
  if (plan.steps !== null) {
    outputs.push({ lines: stepsLines(plan.steps), file: both ? join(plan.out!, `${run.id}-steps.${plan.steps}`) : plan.out, what: 'steps' });
  }
  if (plan.episodes !== null) {
    outputs.push({ lines: episodeLines(plan.episodes), file: both ? join(plan.out!, `${run.id}-episodes.jsonl`) : plan.out, what: 'episodes' });
  }
  for (const output of outputs) {
    if (output.file === undefined) {
      await writeLines(process.stdout, output.lines);
      continue;
    }
    const lines = await writeFileWhole(resolve(output.file), output.lines);
    process.stderr.write(`wrote ${output.file} (${output.what}: ${output.what === 'steps' && plan.steps === 'csv' ? lines - 1 : lines} lines)\n`);
  }
  return 0;
}

/** Writes each line, waiting for 'drain' when the target's buffer is full: memory stays bounded at any length. */
async function writeLines(target: Writable, lines: Iterable<string>): Promise<number> {
  let count = 0;
  for (const line of lines) {
    if (!target.write(line)) await once(target, 'drain');
    count++;
  }
  return count;
}

/** FILE.tmp, renamed to FILE when complete: an interrupted export leaves no short file behind. */
async function writeFileWhole(file: string, lines: Iterable<string>): Promise<number> {
  const partial = `${file}.tmp`;
  const out = createWriteStream(partial);
  try {
    const failed = once(out, 'error').then(([err]) => Promise.reject(err as Error));
    failed.catch(() => {}); // handled by the races below; an error after the rename has nothing left to spoil
    const count = await Promise.race([writeLines(out, lines), failed]);
    out.end();
    await Promise.race([once(out, 'close'), failed]);
    renameSync(partial, file);
    return count;
  } catch (err) {
    out.destroy();
    rmSync(partial, { force: true });
    throw err;
  }
}
