/**
 * A study's report: report.md (and report.html, the same with the plots inline) in the study's folder, with the
 * question, the hypothesis and criterion as written before any result, the decision, a table of every arm's metric
 * with its interval, learning curves as mean ± 95% band over seeds (SVG), the threats to validity, the events, and
 * every run with the command that opens it.
 */
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { lineChartSvg, type Series } from '../../common/charts/svg-chart.ts';
import { formatParamValue } from '../../common/research/search/space.ts';
import type { ArmAnalysis, BandPoint, StudyAnalysis, StudyEvent } from '../../common/research-api.ts';
import { writeFileAtomic } from '../atomic-file.ts';
import { markdownTable, NONE, num3 } from '../report/run-format.ts';
import { studyEvents, studyRuns, type StudyRow, type StudyRunRow } from '../store/studies.ts';

export interface StudyReportInput {
  study: StudyRow;
  runs: readonly StudyRunRow[];
  events: readonly StudyEvent[];
  analysis: StudyAnalysis | null;
}

const PLOTS = [
  { file: 'reward.svg', title: 'Rollout reward per step (mean ± 95% band over seeds)', yLabel: 'reward', band: (a: ArmAnalysis) => a.rewardBand },
  { file: 'eval.svg', title: 'Held-out success (mean ± 95% band over seeds)', yLabel: 'success', band: (a: ArmAnalysis) => a.evalBand },
] as const;

/** What a report is made of, read from the store. */
export function readStudyReportInput(db: Database, study: StudyRow): StudyReportInput {
  return { study, runs: studyRuns(db, study.id), events: studyEvents(db, study.id), analysis: study.analysis };
}

export interface RenderedStudyReport {
  markdown: string;
  /** The same page with the plots inline. */
  html: string;
  plots: { file: string; svg: string }[];
}

/** The report in memory (what the control API answers for a study, finished or not). */
export function renderStudyReport(input: StudyReportInput): RenderedStudyReport {
  const plots = studyPlots(input.analysis);
  const markdown = studyReportMarkdown(input, plots.map((p) => p.file));
  return { markdown, html: reportHtml(input.study.name, markdown, plots), plots };
}

/** Writes report.md, report.html and the plots into `dir`; returns report.md's path. */
export function writeStudyReport(input: StudyReportInput, dir: string): string {
  const { markdown, html, plots } = renderStudyReport(input);
  for (const plot of plots) writeFileAtomic(join(dir, plot.file), plot.svg);
  writeFileAtomic(join(dir, 'report.md'), markdown);
  writeFileAtomic(join(dir, 'report.html'), html);
  return join(dir, 'report.md');
}

/** The plots worth drawing: a curve needs two points of some arm. */
function studyPlots(analysis: StudyAnalysis | null): { file: string; svg: string }[] {
  if (!analysis) return [];
  const out: { file: string; svg: string }[] = [];
  for (const plot of PLOTS) {
    const series: Series[] = analysis.arms
      .filter((arm) => plot.band(arm).length > 1)
      .map((arm) => ({ name: armLabel(arm), points: plot.band(arm).map((p) => ({ x: p.step, y: p.mean })), band: bandOf(plot.band(arm)) }));
    if (series.length) out.push({ file: plot.file, svg: lineChartSvg(series, { title: plot.title, xLabel: 'training step', yLabel: plot.yLabel, yDomain: [0, 1] }) });
  }
  return out;
}

function bandOf(points: readonly BandPoint[]): { x: number; low: number; high: number }[] {
  return points.filter((p) => p.low !== null && p.high !== null).map((p) => ({ x: p.step, low: Math.max(0, p.low!), high: Math.min(1, p.high!) }));
}

function armLabel(arm: ArmAnalysis): string {
  return `${arm.arm} (${arm.steps} steps)`;
}

export function studyReportMarkdown(input: StudyReportInput, plotFiles: readonly string[] = []): string {
  const { study, runs, events, analysis } = input;
  const spec = study.spec as { metric?: { kind: string }; stages?: { name: string }[] };
  const lines: string[] = [
    `# Study ${study.name}`,
    '',
    `**Question.** ${study.question}`,
    '',
    `**Hypothesis** (written before any result). ${study.hypothesis.trim()}`,
    '',
    `**Decision criterion** (written before any result). ${analysis?.criterion ?? NONE}`,
    '',
    `Study \`${study.id}\` · planner: ${study.planner} · status: **${study.status}**${study.reason ? ` (${study.reason})` : ''} · started ${study.createdAt}${study.endedAt ? ` · ended ${study.endedAt}` : ''}`,
    '',
    '## Decision',
    '',
    analysis?.decision ? `**${analysis.decision.outcome.toUpperCase()}.** ${analysis.decision.statement}` : 'No decision: the study has not finished its last stage.',
    '',
  ];
  if (analysis) {
    lines.push(`## Arms (metric: ${analysis.metric})`, '');
    lines.push(
      markdownTable(
        ['stage', 'arm', 'settings', 'steps', 'runs', 'mean', '95% CI', 'per seed', 'failed/stopped'],
        analysis.arms.map((arm) => [
          String(arm.stage + 1),
          arm.arm === analysis.best ? `**${arm.arm}** (best)` : arm.arm,
          Object.entries(arm.params).map(([k, v]) => `${k}=${formatParamValue(v)}`).join(', ') || NONE,
          String(arm.steps),
          String(arm.n),
          num3(arm.mean),
          arm.low === null || arm.high === null ? NONE : `[${num3(arm.low)}, ${num3(arm.high)}]`,
          arm.values.map((v) => `s${v.seed}: ${num3(v.value)}`).join(', ') || NONE,
          String(arm.failed),
        ]),
      ),
      '',
    );
    for (const file of plotFiles) lines.push(`![${file}](${file})`, '');
    lines.push('## Threats to validity', '');
    lines.push(...(analysis.threats.length ? analysis.threats.map((t) => `- ${t}`) : ['- None found by the checks (seeds, eval size, failures, budget, selection).']), '');
  }
  lines.push('## Runs', '');
  lines.push(
    markdownTable(
      ['run', 'status', 'attempts', 'metric', 'final held-out', 'reason', 'open with'],
      runs.map((run) => [
        `${run.stage + 1}/${run.arm}/s${run.seed}@${run.steps}`,
        run.status,
        String(run.attempts),
        num3(run.metric),
        run.curve?.finalEval ? `${num3(run.curve.finalEval.successRate)} of ${run.curve.finalEval.episodes}` : NONE,
        run.reason ?? NONE,
        run.curve?.runIds.length ? `\`agentjet runs show ${run.curve.runIds.at(-1)} --data-dir ${run.dir}\`` : `\`${run.dir}\``,
      ]),
    ),
    '',
  );
  lines.push('## Events', '', ...events.map((e) => `- ${e.time} · ${e.kind} · ${e.message}`), '');
  lines.push(`Stages: ${(spec.stages ?? []).map((s) => s.name).join(' → ') || NONE}. The study as run is \`study.json\` beside this report.`, '');
  return lines.join('\n');
}

/** The Markdown as a standalone page: the text preformatted, each plot inline (a browser needs nothing else). */
function reportHtml(title: string, markdown: string, plots: readonly { file: string; svg: string }[]): string {
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const svgOf = new Map(plots.map((p) => [p.file, p.svg]));
  const body = markdown
    .split('\n')
    .map((line) => {
      const svg = svgOf.get(/^!\[[^\]]*\]\(([^)]+)\)$/.exec(line)?.[1] ?? '');
      return svg === undefined ? escape(line) : `</pre>${svg}<pre>`;
    })
    .join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title><style>body{font:14px system-ui,sans-serif;max-width:1100px;margin:2em auto}pre{white-space:pre-wrap}</style></head><body><pre>${body}</pre></body></html>\n`;
}
