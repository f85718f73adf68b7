/**
 * `agentjet research run STUDY.yaml | ask "QUESTION" | list | show ID | stop ID | resume ID | report ID`: studies
 * (swarm/node/research/). A study runs inside a peer: the running peer of the data dir, or, when none runs there,
 * one this command starts for the study (headless, stopped when the study ends; a study cut short by Ctrl-C
 * resumes at the next start of a peer on that data dir). list, show and report read a stopped peer's store too.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';
import type { Database } from 'better-sqlite3';
import type { StudyDetail, StudySummary } from '../../common/research-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { textTable } from '../report/run-format.ts';
import { parseStudyText } from '../research/study-file.ts';
import { getStudy, listStudies, studyDetail, studySummary } from '../store/studies.ts';
import { readStudyReportInput, writeStudyReport } from '../research/study-report.ts';
import { UsageError, type Command, type OptionValues } from './command.ts';
import { dataDirOf, openOfflineStore, peerOrOffline } from './offline-store.ts';
import { studyDir } from '../paths.ts';
import { dataDirOption, PeerClient } from './peer-client.ts';
import { ProgressBar } from './progress.ts';

/** The newest table the study reads touch (studies, migration 10). */
const STUDIES_SCHEMA_VERSION = 10;
/** How often a followed study is looked at. */
const FOLLOW_INTERVAL_MS = 2000;
/** `--budget`: `90m`, `2h`, `1.5h`, or minutes as a bare number. */
const BUDGET = /^(\d+(?:\.\d+)?)(m|h)?$/;

const SUBCOMMANDS = ['run', 'ask', 'list', 'show', 'stop', 'resume', 'report'] as const;
type Subcommand = (typeof SUBCOMMANDS)[number];

const FLAGS_OF: Record<Subcommand, readonly string[]> = {
  run: ['detach', 'json'],
  ask: ['planner', 'budget', 'max-runs', 'detach', 'json', 'script', 'reward', 'model', 'tasks'],
  list: ['json'],
  show: ['json'],
  stop: [],
  resume: ['detach', 'json'],
  report: ['out'],
};

const USAGE = `agentjet research run STUDY.yaml [--detach] [--json]
                 | ask "QUESTION" [--planner self[:MODEL]|URL|env] [--budget 2h] [--max-runs N] [--detach]
                 | list [--json] | show ID [--json] | stop ID | resume ID | report ID [--out DIR]

Research studies: a question answered by training runs, with a decision criterion written before any result.

  run STUDY     validate the study file and run it on the data dir's peer (one is started for it when none
                runs there); progress is shown until it ends, then the decision and the report's path.
                --detach: submit and return at once (the peer keeps running it)
  ask QUESTION  the LLM planner writes the study (validated; invalid plans are sent back with the reasons, a
                bounded number of times), then it runs like \`run\`. --planner: self or self:MODEL (a model hosted
                on the peer), an OpenAI-compatible base URL (with AGENTJET_PLANNER_MODEL, AGENTJET_PLANNER_API_KEY), or
                env (AGENTJET_PLANNER_URL, default). --budget: wall time (90m, 2h), --max-runs: runs in all.
                The base run defaults to the calculator agent on builtin:tiny; --script, --reward, --model, --tasks
                (a JSONL file) change it.
  list          studies, newest first: status, stage, runs, decision
  show ID       the question, hypothesis, criterion, decision, arms with intervals, runs and events
  stop ID       stop a running study (its runs stop; resume continues it)
  resume ID     continue a stopped or failed study where it was
  report ID     write report.md, report.html and SVG plots (default: the study's folder in the data dir)

Options:
  --data-dir DIR    the peer's data folder (default: AGENTJET_DATA_DIR, else the platform's app-data folder)
  --json            print JSON instead of text`;

export const researchCommand: Command = {
  name: 'research',
  summary: 'run research studies (multi-run RL experiments with a pre-registered decision), list, show, report them',
  usage: USAGE,
  options: {
    ...dataDirOption,
    json: { type: 'boolean' },
    detach: { type: 'boolean' },
    planner: { type: 'string' },
    budget: { type: 'string' },
    'max-runs': { type: 'string' },
    script: { type: 'string' },
    reward: { type: 'string' },
    model: { type: 'string' },
    tasks: { type: 'string' },
    out: { type: 'string' },
  },
  positionals: { min: 1, max: 2, names: `a subcommand: ${SUBCOMMANDS.join(', ')}` },
  async run(values, [subText, arg]) {
    const sub = subcommandOf(subText);
    refuseFlags(values, sub);
    if (sub === 'list') {
      if (arg !== undefined) throw new UsageError(`list takes no argument, got "${arg}"`);
      return withStudies(values, async (read) => print(values, await read.list(), listText));
    }
    if (arg === undefined) throw new UsageError(sub === 'run' ? 'run needs a study file (see examples/studies/)' : sub === 'ask' ? 'ask needs a question in quotes' : `${sub} needs a study id (\`agentjet research list\` lists them)`);
    if (sub === 'show') return withStudies(values, async (read) => print(values, await read.detail(arg), showText));
    if (sub === 'report') {
      return withStudies(values, async (read) => {
        const path = await read.report(arg, typeof values.out === 'string' ? resolve(values.out) : undefined);
        process.stdout.write(`wrote ${path}\n`);
        return 0;
      });
    }
    if (sub === 'run') {
      const file = resolve(arg);
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
      }
      const format = extname(file).toLowerCase() === '.json' ? 'json' : 'yaml';
      // Checked here first, so a bad file never starts a peer; the peer checks it again.
      parseStudyText(text, dirname(file), format);
      return onPeer(values, (api) => api.request<StudySummary>('POST', '/studies', { text, baseDir: dirname(file), format }));
    }
    if (sub === 'ask') {
      const body = {
        question: arg,
        planner: plannerOf(values.planner as string | undefined),
        budget: { ...(values.budget ? { maxWallMinutes: budgetMinutes(values.budget as string) } : {}), ...(values['max-runs'] ? { maxRuns: positive('--max-runs', values['max-runs'] as string) } : {}) },
        defaults: askDefaults(values),
        baseDir: process.cwd(),
      };
      return onPeer(values, (api) => api.request<StudySummary>('POST', '/studies/ask', body));
    }
    if (sub === 'stop') {
      const access = peerOrOffline(dataDirOf(values));
      if (access.kind !== 'peer') throw new UsageError(`no peer runs on ${access.dataDir}, so no study is running there; \`agentjet research resume ID\` continues one`);
      const stopped = await access.client.request<StudySummary>('POST', `/studies/${encodeURIComponent(arg)}/stop`);
      process.stdout.write(`study ${stopped.id}: ${stopped.status}\n`);
      return 0;
    }
    return onPeer(values, (api) => api.request<StudySummary>('POST', `/studies/${encodeURIComponent(arg)}/resume`));
  },
};

function subcommandOf(text: string): Subcommand {
  if (!(SUBCOMMANDS as readonly string[]).includes(text)) throw new UsageError(`unknown subcommand "${text}"; use one of ${SUBCOMMANDS.join(', ')}`);
  return text as Subcommand;
}

function refuseFlags(values: OptionValues, sub: Subcommand): void {
  for (const [flag, value] of Object.entries(values)) {
    if (value === undefined || flag === 'data-dir' || FLAGS_OF[sub].includes(flag)) continue;
    throw new UsageError(`--${flag} does not apply to research ${sub}`);
  }
}

function plannerOf(text: string | undefined): unknown {
  if (text === undefined || text === 'env') return 'env';
  if (text === 'self') return { self: null };
  if (text.startsWith('self:') && text.length > 5) return { self: text.slice(5) };
  if (/^https?:\/\//.test(text)) return { baseUrl: text, model: process.env.AGENTJET_PLANNER_MODEL ?? 'default', apiKey: process.env.AGENTJET_PLANNER_API_KEY ?? '' };
  throw new UsageError(`--planner must be self, self:MODEL, an http(s) URL or env, got "${text}"`);
}

function budgetMinutes(text: string): number {
  const match = BUDGET.exec(text);
  if (!match || Number(match[1]) <= 0) throw new UsageError(`--budget must be a wall time such as 90m or 2h, got "${text}"`);
  return Number(match[1]) * (match[2] === 'h' ? 60 : 1);
}

function positive(flag: string, text: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new UsageError(`${flag} must be a whole number ≥ 1, got "${text}"`);
  return Number(text);
}

const repoFile = (path: string) => new URL(`../../../${path}`, import.meta.url).pathname;

/** The base run an asked study starts from, unless the question's flags change it. */
function askDefaults(values: OptionValues): Record<string, unknown> {
  const tasks = typeof values.tasks === 'string' ? { file: resolve(values.tasks) } : { calculator: { train: 400, eval: 40, seed: 7 } };
  return {
    model: (values.model as string | undefined) ?? 'builtin:tiny',
    script: resolve((values.script as string | undefined) ?? repoFile('examples/calculator/agent.ts')),
    reward: resolve((values.reward as string | undefined) ?? repoFile('examples/calculator/reward.ts')),
    tasks,
  };
}

/** Submits to the data dir's peer (started here for the study when none runs) and follows the study. */
async function onPeer(values: OptionValues, submit: (api: PeerClient) => Promise<StudySummary>): Promise<number> {
  const dataDir = dataDirOf(values);
  let access: ReturnType<typeof peerOrOffline> | null = null;
  try {
    access = peerOrOffline(dataDir);
  } catch {
    access = null;
  }
  if (access?.kind === 'peer') {
    const study = await submit(access.client);
    return values.detach ? printSubmitted(values, study) : follow(values, access.client, study.id);
  }
  if (values.detach) throw new UsageError(`--detach needs a running peer on ${dataDir} to keep the study going; start one with \`agentjet node --data-dir ${dataDir}\``);
  const runtime = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'warn' });
  const api = new PeerClient(runtime.urls.api, runtime.token);
  const interrupt = () => process.stderr.write('\nstopping; the study resumes at the next start of a peer on this data dir (`agentjet research resume ID` or `agentjet node`)\n');
  let stopping: Promise<void> | undefined;
  const onSignal = () => {
    interrupt();
    stopping ??= runtime.stop();
  };
  process.once('SIGINT', onSignal);
  try {
    const study = await submit(api);
    process.stderr.write(`study ${study.id} runs on a peer started for it in ${dataDir}\n`);
    return await follow(values, api, study.id, () => stopping !== undefined);
  } finally {
    process.off('SIGINT', onSignal);
    await (stopping ?? runtime.stop());
  }
}

function printSubmitted(values: OptionValues, study: StudySummary): number {
  if (values.json) process.stdout.write(JSON.stringify(study) + '\n');
  else process.stdout.write(`study ${study.id}: ${study.status} (\`agentjet research show ${study.id}\`)\n`);
  return 0;
}

/** Progress until the study ends; then its decision and report. Exit code 0 when it is done, 1 otherwise. */
async function follow(values: OptionValues, api: PeerClient, id: string, interrupted: () => boolean = () => false): Promise<number> {
  let bar: ProgressBar | null = null;
  let total = 0;
  for (;;) {
    const detail = await api.get<StudyDetail>(`/studies/${encodeURIComponent(id)}`);
    const runs = detail.studyRuns;
    if (runs.length !== total) {
      total = runs.length;
      bar = new ProgressBar({ total: Math.max(1, total), label: `study ${detail.name}` });
    }
    const ended = runs.filter((r) => r.status === 'done' || r.status === 'failed' || r.status === 'stopped').length;
    const running = runs.filter((r) => r.status === 'running');
    bar?.update(ended, {
      stage: `${detail.stage + 1}/${detail.stages}`,
      running: running.map((r) => `${r.arm}/s${r.seed}@${r.runStep}${r.phase === 'evaluating' ? ' eval' : ''}`).join(' ') || '-',
      failed: detail.runs.failed,
    });
    if (['done', 'failed', 'stopped'].includes(detail.status) || (detail.status === 'planning' && interrupted())) {
      bar?.done({ stage: `${detail.stage + 1}/${detail.stages}`, failed: detail.runs.failed });
      if (values.json) process.stdout.write(JSON.stringify(detail) + '\n');
      else process.stdout.write(showText(detail) + `\nreport: \`agentjet research report ${detail.id}\`\n`);
      return detail.status === 'done' ? 0 : 1;
    }
    if (interrupted()) return 1;
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_INTERVAL_MS));
  }
}

interface StudyReads {
  list(): Promise<StudySummary[]>;
  detail(id: string): Promise<StudyDetail>;
  report(id: string, dir?: string): Promise<string>;
}

/** Reads of the data dir's studies: from its running peer, or from the store of a stopped one. */
async function withStudies(values: OptionValues, use: (read: StudyReads) => Promise<number>): Promise<number> {
  const access = peerOrOffline(dataDirOf(values));
  if (access.kind === 'peer') {
    const { client } = access;
    return use({
      list: async () => (await client.get<{ studies: StudySummary[] }>('/studies')).studies,
      detail: (id) => client.get<StudyDetail>(`/studies/${encodeURIComponent(id)}`),
      report: async (id, dir) => {
        const detail = await client.get<StudyDetail>(`/studies/${encodeURIComponent(id)}`);
        const out = dir ?? studyDir(access.dataDir, detail.id);
        mkdirSync(out, { recursive: true });
        // report.html holds the plots inline, so the pair stands alone wherever it is written.
        await client.download(`/studies/${encodeURIComponent(id)}/report.html`, resolve(out, 'report.html'));
        await client.download(`/studies/${encodeURIComponent(id)}/report.md`, resolve(out, 'report.md'));
        return resolve(out, 'report.md');
      },
    });
  }
  const db = openOfflineStore(access.dataDir, { minSchemaVersion: STUDIES_SCHEMA_VERSION });
  try {
    return use(offlineReads(db, access.dataDir));
  } finally {
    db.close();
  }
}

function missing(id: string): never {
  throw new UsageError(`no study "${id}"; \`agentjet research list\` lists them`);
}

function offlineReads(db: Database, dataDir: string): StudyReads {
  const find = (id: string) => getStudy(db, id) ?? missing(id);
  return {
    list: async () => listStudies(db).map((s) => studySummary(db, s)),
    detail: async (id) => studyDetail(db, find(id)),
    report: async (id, dir) => {
      const study = find(id);
      return writeStudyReport(readStudyReportInput(db, study), dir ?? studyDir(dataDir, study.id));
    },
  };
}

function print<T>(values: OptionValues, value: T, text: (value: T) => string): number {
  process.stdout.write(values.json ? JSON.stringify(value) + '\n' : text(value) + '\n');
  return 0;
}

const num = (x: number | null | undefined) => (x === null || x === undefined ? '-' : x.toFixed(3));

function listText(studies: StudySummary[]): string {
  if (studies.length === 0) return 'no studies yet (`agentjet research run examples/studies/kl-penalty.study.yaml`)';
  return textTable(
    ['id', 'status', 'stage', 'runs', 'decision', 'question'],
    studies.map((s) => [s.id, s.status, `${s.stage + 1}/${s.stages}`, `${s.runs.done}/${s.runs.total}${s.runs.failed ? ` (${s.runs.failed} failed)` : ''}`, s.decision ?? '-', s.question]),
  );
}

function showText(detail: StudyDetail): string {
  const lines = [
    `study ${detail.id} · ${detail.status}${detail.reason ? ` (${detail.reason})` : ''} · planner: ${detail.planner}`,
    `question:   ${detail.question}`,
    `hypothesis: ${detail.hypothesis.trim()}`,
    `criterion:  ${detail.analysis?.criterion ?? JSON.stringify(detail.spec.decision ?? null)}`,
    `decision:   ${detail.analysis?.decision ? `${detail.analysis.decision.outcome.toUpperCase()} — ${detail.analysis.decision.statement}` : '-'}`,
    '',
  ];
  if (detail.analysis) {
    lines.push(
      textTable(
        ['stage', 'arm', 'steps', 'n', 'mean', '95% CI', 'failed'],
        detail.analysis.arms.map((a) => [String(a.stage + 1), a.arm, String(a.steps), String(a.n), num(a.mean), a.low === null ? '-' : `[${num(a.low)}, ${num(a.high)}]`, String(a.failed)]),
      ),
      '',
    );
    for (const threat of detail.analysis.threats) lines.push(`threat: ${threat}`);
    if (detail.analysis.threats.length) lines.push('');
  }
  lines.push(
    textTable(
      ['run', 'status', 'attempts', 'metric', 'reason', 'dir'],
      detail.studyRuns.map((r) => [`${r.stage + 1}/${r.arm}/s${r.seed}@${r.steps}`, r.status + (r.phase ? ` (${r.phase} ${r.runStep})` : ''), String(r.attempts), num(r.metric), r.reason ?? '-', r.dir]),
    ),
  );
  return lines.join('\n');
}
