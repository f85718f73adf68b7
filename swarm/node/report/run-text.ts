/**
 * Runs as `agentjet runs list|show|compare` print them: plain-text tables for a terminal (the `--json` forms print
 * the control API's own shapes instead).
 */
import type { RunComparison, RunDetail, RunEvalPoint, RunSummary, RunTaskRow } from '../../common/runs-api.ts';
import { flattenConfig } from '../../common/config-paths.ts';
import { configRows, evalText, NONE, num3, pct, runDuration, startText, textTable, valueText } from './run-format.ts';

/** Where a value in a column of runs differs from the others, or was changed from the defaults. */
const CHANGED_MARK = '*';

export function runsListText(runs: readonly RunSummary[], total: number, now = new Date()): string {
  if (runs.length === 0) return 'No training runs in this data dir yet (a model starts its first run when it trains).';
  const table = textTable(
    ['id', 'name', 'model', 'status', 'steps', 'best reward', 'last reward', 'last eval', 'started', 'duration'],
    runs.map((r) => [
      r.id,
      r.name,
      r.model,
      r.status,
      String(r.steps),
      num3(r.bestReward),
      num3(r.lastReward),
      r.lastEval ? `${pct(r.lastEval.successRate)} @${r.lastEval.step}` : NONE,
      r.createdAt.replace('T', ' ').slice(0, 19),
      runDuration(r, now),
    ]),
  );
  const footer = `${runs.length} of ${total} runs, newest first (rewards: the trained batch's mean; last eval: held-out success @ step)`;
  return `${table}\n${footer}`;
}

export function runShowText(detail: RunDetail, evals: readonly RunEvalPoint[], tasks: readonly RunTaskRow[], now = new Date()): string {
  const d = detail;
  const out: string[] = [
    `run ${d.id} (${d.name}), model ${d.model}: ${d.status}`,
    `  start        ${startText(d.start)}`,
    `  seed         ${d.seed}`,
    `  config hash  ${d.configHash}`,
    `  created      ${d.createdAt}, ended ${d.endedAt ?? NONE}, duration ${runDuration(d, now)}`,
    `  steps        ${d.steps} standing, last step ${d.lastStep} (model step = run step + ${d.stepOffset})`,
    `  batch reward best ${num3(d.bestReward)}, last ${num3(d.lastReward)} (mean over the trained groups' episodes)`,
    `  last eval    ${evalText(d.lastEval)} (held-out eval episodes)`,
  ];
  out.push('', `warnings${d.warnings.length === 0 ? ': none' : ''}`, ...d.warnings.map((w) => `  ${w.code}: ${w.message}`));
  const rows = configRows(d);
  out.push('', `configuration (${CHANGED_MARK} changed from the model's defaults)`, indent(textTable(['', 'key', 'value'], rows.map((r) => [r.changed ? CHANGED_MARK : '', r.key, r.value]))));
  out.push('', section('events', d.events.length, () => textTable(['step', 'kind', 'what', 'time'], d.events.map((e) => [String(e.step), e.kind, e.label, e.time]))));
  out.push(
    '',
    section('checkpoints', d.checkpoints.length, () =>
      textTable(['step', 'model step', 'version', 'time', 'folder'], d.checkpoints.map((c) => [String(c.step), String(c.modelStep), `v${c.policyVersion}`, c.time, c.dir])),
    ),
  );
  out.push(
    '',
    section('scripts', d.scripts.length, () =>
      textTable(
        ['client', 'version', 'hash', 'episodes', 'first', 'last'],
        d.scripts.map((s) => [s.client, s.version === null ? NONE : `v${s.version}`, (s.hash ?? NONE).slice(0, 12), String(s.episodes), s.firstAt, s.lastAt]),
      ),
    ),
  );
  out.push(
    '',
    section('tasks (train: all finished train episodes; eval: held-out)', tasks.length, () =>
      textTable(
        ['task', 'split', 'episodes', 'mean reward', 'success', 'latest weights reward'],
        tasks.map((t) => [t.taskId, t.kind, String(t.episodes), num3(t.meanReward), pct(t.successRate), num3(t.lastReward)]),
      ),
    ),
  );
  out.push(
    '',
    section('held-out eval', evals.length, () =>
      textTable(['step', 'version', 'episodes', 'success', 'mean reward'], evals.map((e) => [String(e.step), `v${e.policyVersion}`, String(e.episodes), pct(e.successRate), num3(e.meanReward)])),
    ),
  );
  return out.join('\n');
}

export function runCompareText(comparison: RunComparison): string {
  const { runs, differingKeys } = comparison;
  const differing = new Set(differingKeys);
  const flats = runs.map((r) => flattenConfig(r.config));
  const keys = [...new Set(flats.flatMap((f) => [...f.keys()]))].sort((a, b) => {
    const da = differing.has(a) ? 0 : 1;
    const db = differing.has(b) ? 0 : 1;
    return da - db || (a < b ? -1 : a > b ? 1 : 0);
  });
  const ids = runs.map((r) => r.id);
  const config = textTable(
    ['', 'key', ...ids],
    keys.map((k) => [differing.has(k) ? CHANGED_MARK : '', k, ...flats.map((f) => valueText(f.get(k)))]),
  );
  const results = textTable(
    ['run', 'name', 'status', 'steps', 'best reward', 'last reward', 'last eval'],
    runs.map((r) => [r.id, r.name, r.status, String(r.steps), num3(r.bestReward), num3(r.lastReward), evalText(r.lastEval)]),
  );
  return [
    `${runs.length} runs; ${differingKeys.length} configuration key(s) differ (${CHANGED_MARK}, listed first)`,
    '',
    results,
    '',
    config,
  ].join('\n');
}

function section(title: string, count: number, table: () => string): string {
  return count === 0 ? `${title}: none` : `${title}\n${indent(table())}`;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}
