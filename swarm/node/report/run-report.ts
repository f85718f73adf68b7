/**
 * A run's report folder: one standalone SVG per plot (run-plots.ts) and report.md tying them together with the
 * run's configuration, events, checkpoints, scripts, held-out evals and per-task table. It opens in any Markdown
 * viewer; the SVGs open in a browser. Written by `agentjet runs report RUN` for any run, and by the demo (which adds
 * its held-out before/after figures through `markers` and `intro`).
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lineChartSvg, type PointMarker } from '../../common/charts/svg-chart.ts';
import type { RunTaskRow } from '../../common/runs-api.ts';
import { configRows, evalText, markdownTable, NONE, num3, pct, runDuration, startText } from './run-format.ts';
import { klIsOff, runPlots, type Plot, type PlotId } from './run-plots.ts';
import type { ReportStep, RunReportData } from './run-report-data.ts';

/** Rows of the steps table: a long run's table would bury the report; `agentjet runs export` gives every step. */
export const MAX_TABLE_STEPS = 60;

export interface RunReportOptions {
  /** Labelled points to add to plots, by plot id. */
  markers?: Partial<Record<PlotId, PointMarker[]>>;
  /** The report's first heading (default: "Training run NAME"). */
  title?: string;
  /** Markdown placed right after the run's header (the demo's held-out before/after). */
  intro?: string;
}

export interface WrittenReport {
  /** report.md's path. */
  report: string;
  /** Every file written, report.md last. */
  files: string[];
}

/** Writes the report into `dir` (created if missing); each file is written whole (temporary name, then rename). */
export function writeRunReport(data: RunReportData, dir: string, options: RunReportOptions = {}): WrittenReport {
  mkdirSync(dir, { recursive: true });
  const plots = runPlots(data, options.markers);
  const files: string[] = [];
  for (const plot of plots) {
    files.push(writeWhole(join(dir, plot.file), plotSvg(plot)));
  }
  files.push(writeWhole(join(dir, 'report.md'), reportMarkdown(data, plots, options)));
  return { report: files[files.length - 1], files };
}

export function plotSvg(plot: Plot): string {
  return lineChartSvg(plot.series, { title: plot.title, xLabel: 'training step (of the run)', yLabel: plot.yLabel, yDomain: plot.yDomain, format: plot.format, markers: plot.markers, events: plot.events });
}

function writeWhole(path: string, text: string): string {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
  return path;
}

const code = (text: string) => `\`${text.replace(/`/g, "'")}\``;

export function reportMarkdown(data: RunReportData, plots: readonly Plot[], options: RunReportOptions = {}): string {
  const d = data.detail;
  const last = data.steps.at(-1);
  const merge = data.mergeTotals.merged > 0 ? `${(data.mergeTotals.naive / data.mergeTotals.merged).toFixed(2)}×` : NONE;
  const sections: string[] = [];
  sections.push(`# ${options.title ?? `Training run ${d.name}`}

Run **${d.name}** (${code(d.id)}) of model **${d.model}**: **${d.status}**, ${d.steps} standing steps (last step ${d.lastStep}).

- Start: ${startText(d.start)}
- Seed ${d.seed}, configuration hash ${code(d.configHash)}
- Created ${d.createdAt}, ended ${d.endedAt ?? NONE}, duration ${runDuration(d, new Date(data.readAt))}
- Batch reward (mean over the trained groups' episodes): last ${num3(d.lastReward)}, best ${num3(d.bestReward)}
- Batch success (the trained groups' episodes) at the last step: ${pct(last?.successRate)}
- Held-out eval (eval episodes, never trained on), latest: ${evalText(d.lastEval)}
- Timeline merge: one sample per LLM call would hold ${merge} the tokens the merged timelines held${klIsOff(d.config) ? '\n- KL penalty: off (train.klCoef = 0)' : ''}`);
  if (options.intro) sections.push(options.intro.trim());
  if (d.warnings.length > 0) sections.push(`## Warnings\n\n${d.warnings.map((w) => `- **${w.code}**: ${w.message}`).join('\n')}`);
  sections.push(`## Plots\n\n${plots.map((p) => `### ${p.title}\n\n![${p.title}](${p.file})\n\n${p.caption}`).join('\n\n')}`);
  sections.push(
    `## Held-out eval\n\n${
      data.evals.length === 0
        ? 'No eval episodes in this run.'
        : markdownTable(
            ['step (weights)', 'policy version', 'episodes', 'success', 'mean reward', 'last at'],
            data.evals.map((e) => [String(e.step), `v${e.policyVersion}`, String(e.episodes), pct(e.successRate), num3(e.meanReward), e.time]),
          )
    }`,
  );
  sections.push(`## Per task\n\n${taskTables(data.tasks)}`);
  sections.push(
    `## Events\n\n${
      d.events.length === 0 ? 'None recorded.' : markdownTable(['step', 'kind', 'what', 'time'], d.events.map((e) => [String(e.step), e.kind, e.label, e.time]))
    }`,
  );
  sections.push(
    `## Checkpoints\n\n${
      d.checkpoints.length === 0
        ? 'None written.'
        : markdownTable(['step', 'model step', 'policy version', 'time', 'folder'], d.checkpoints.map((c) => [String(c.step), String(c.modelStep), `v${c.policyVersion}`, c.time, code(c.dir)]))
    }`,
  );
  sections.push(
    `## Scripts\n\n${
      d.scripts.length === 0
        ? 'No episodes from attached scripts.'
        : markdownTable(
            ['client', 'version', 'hash', 'episodes', 'first', 'last'],
            d.scripts.map((s) => [s.client, s.version === null ? NONE : `v${s.version}`, (s.hash ?? NONE).slice(0, 12), String(s.episodes), s.firstAt, s.lastAt]),
          )
    }`,
  );
  sections.push(
    `## Configuration\n\nThe full resolved training configuration; ✱ marks the keys changed from this model's defaults.\n\n${markdownTable(
      ['key', 'value', 'changed'],
      configRows(d).map((r) => [code(r.key), code(r.value), r.changed ? '✱' : '']),
    )}`,
  );
  sections.push(stepsSection(data));
  return sections.join('\n\n') + '\n';
}

function taskTables(tasks: readonly RunTaskRow[]): string {
  if (tasks.length === 0) return 'No finished episodes in this run.';
  const table = (kind: RunTaskRow['kind'], heading: string) => {
    const rows = tasks.filter((t) => t.kind === kind);
    if (rows.length === 0) return `### ${heading}\n\nNone.`;
    return `### ${heading}\n\n${markdownTable(
      ['task', 'episodes', 'mean reward', 'success', 'mean reward on the latest weights'],
      rows.map((t) => [t.taskId, String(t.episodes), num3(t.meanReward), pct(t.successRate), num3(t.lastReward)]),
    )}`;
  };
  return `${table('train', 'Train tasks (all finished train episodes)')}\n\n${table('eval', 'Held-out tasks (eval episodes)')}`;
}

/** At most MAX_TABLE_STEPS rows, evenly spread over the run, the last step always included. */
function tableSteps(steps: readonly ReportStep[]): ReportStep[] {
  if (steps.length <= MAX_TABLE_STEPS) return [...steps];
  const every = Math.ceil(steps.length / MAX_TABLE_STEPS);
  const picked = steps.filter((_, i) => i % every === 0);
  if (picked.at(-1) !== steps.at(-1)) picked.push(steps.at(-1)!);
  return picked;
}

function stepsSection(data: RunReportData): string {
  const rows = tableSteps(data.steps);
  if (rows.length === 0) return '## Steps\n\nNo steps yet.';
  const fixed = (v: number | null, digits: number) => (v === null || !Number.isFinite(v) ? NONE : v.toFixed(digits));
  const table = markdownTable(
    ['step', 'batch reward', 'batch success', 'loss', 'KL', 'clip', 'entropy', 'grad norm', 'response tok', 'discarded', 'trainer tok/s', 'merge ×'],
    rows.map((s) => [
      String(s.step),
      num3(s.rewardMean),
      pct(s.successRate),
      fixed(s.loss, 4),
      fixed(s.kl, 5),
      fixed(s.clipFraction, 4),
      fixed(s.entropy, 3),
      fixed(s.gradNorm, 3),
      fixed(s.responseTokensMean, 1),
      pct(s.discardedShare),
      fixed(s.trainerTokensPerS, 0),
      fixed(s.mergeRatio, 2),
    ]),
  );
  const note =
    rows.length < data.detail.steps ? `${rows.length} of the ${data.detail.steps} steps; every step: ${code(`agentjet runs export ${data.detail.id} --steps csv`)}.\n\n` : '';
  return `## Steps\n\n${note}${table}`;
}
