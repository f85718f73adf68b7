/**
 * The demo's run folder: summary.json, one SVG per plot, and report.md tying them together (it opens in any
 * Markdown viewer; the SVGs open in a browser).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lineChartSvg, type Series } from '../report/svg-chart.ts';
import type { DemoResult, StepRecord } from './demo.ts';

interface Plot {
  file: string;
  title: string;
  yLabel: string;
  series: Series[];
  yDomain?: [number, number];
}

const points = (records: StepRecord[], value: (r: StepRecord) => number) => records.map((r) => ({ x: r.step, y: value(r) }));

function plots(result: DemoResult): Plot[] {
  const r = result.stepRecords;
  const firstStep = r[0]?.step ?? 1;
  const lastStep = r[r.length - 1]?.step ?? 1;
  const evalLine = (name: string, y: number, x: number) => ({ name, points: [{ x, y }] });
  return [
    {
      file: 'reward.svg',
      title: 'Reward and success per step (train episodes)',
      yLabel: 'rate',
      yDomain: [0, 1],
      series: [
        { name: 'reward mean', points: points(r, (s) => s.rewardMean) },
        { name: 'success rate', points: points(r, (s) => s.rolloutSuccessRate) },
        evalLine('held-out before', result.eval_before, firstStep),
        evalLine('held-out after', result.eval_after, lastStep),
      ],
    },
    { file: 'loss.svg', title: 'Policy loss', yLabel: 'loss', series: [{ name: 'loss', points: points(r, (s) => s.metrics.loss) }] },
    { file: 'kl.svg', title: 'KL to the starting weights (k3, per token)', yLabel: 'KL', series: [{ name: 'kl', points: points(r, (s) => s.metrics.kl) }] },
    { file: 'clip.svg', title: 'Clip fraction', yLabel: 'share of tokens', series: [{ name: 'clip fraction', points: points(r, (s) => s.metrics.clipFraction) }] },
    {
      file: 'throughput.svg',
      title: 'Tokens per second',
      yLabel: 'tokens/s',
      series: [
        { name: 'trainer', points: points(r, (s) => s.trainerTokensPerS) },
        { name: 'end to end (rollouts + training)', points: points(r, (s) => s.endToEndTokensPerS) },
      ],
    },
    {
      file: 'calls.svg',
      title: 'LLM calls per train episode (the agent’s tool use: 1 = answered at once)',
      yLabel: 'calls',
      series: [{ name: 'calls per episode', points: points(r, (s) => s.callsPerEpisode) }],
    },
    {
      file: 'merge.svg',
      title: 'Timeline merge: naive tokens ÷ merged tokens',
      yLabel: 'ratio',
      series: [{ name: 'merge token ratio', points: points(r, (s) => s.mergeTokenRatio) }],
    },
  ];
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** Writes the run folder's report; returns the report's path. */
export function writeDemoReport(result: DemoResult): string {
  const dir = result.outDir;
  const all = plots(result);
  for (const plot of all) {
    writeFileSync(join(dir, plot.file), lineChartSvg(plot.series, { title: plot.title, xLabel: 'step', yLabel: plot.yLabel, yDomain: plot.yDomain }));
  }
  const { stepRecords: _records, ...summary } = result;
  writeFileSync(join(dir, 'summary.json'), JSON.stringify({ ...summary, stepRecords: result.stepRecords }, null, 2) + '\n');

  const b = result.evalBefore;
  const a = result.evalAfter;
  const rows = result.stepRecords.map(
    (s) =>
      `| ${s.step} | ${s.wallS.toFixed(0)} | ${s.rewardMean.toFixed(3)} | ${s.rolloutSuccessRate.toFixed(3)} | ${s.metrics.loss.toFixed(4)} | ${s.metrics.kl.toFixed(5)} | ${s.metrics.clipFraction.toFixed(4)} | ${s.trainerTokensPerS.toFixed(0)} | ${s.callsPerEpisode.toFixed(2)} | ${s.mergeTokenRatio.toFixed(2)} |`,
  );
  const md = `# AgentJet demo run

Model **${result.model}** on **${result.backend}**, ${result.steps} training steps, ${result.episodes} episodes, ${result.wall_s} s wall time.

## Held-out success (${b.episodes} tasks, never trained on)

| | success | mean reward | aborted | wall time |
| --- | --- | --- | --- | --- |
| before training | ${pct(b.successRate)} | ${b.meanReward.toFixed(3)} | ${b.aborted} | ${b.wallS.toFixed(0)} s |
| after training | ${pct(a.successRate)} | ${a.meanReward.toFixed(3)} | ${a.aborted} | ${a.wallS.toFixed(0)} s |

Change: **${((a.successRate - b.successRate) * 100).toFixed(1)} percentage points**. Policy version ${result.policyVersionBefore} → ${result.policyVersionAfter}.
Timeline merge: the trained samples hold ${result.merge_token_ratio}× fewer tokens than one sample per LLM call would.

## Plots

${all.map((p) => `![${p.title}](${p.file})`).join('\n')}

## Steps

| step | wall s | reward | success | loss | KL | clip | trainer tok/s | calls/episode | merge ratio |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${rows.join('\n')}

## Settings

\`\`\`json
${JSON.stringify(result.options, null, 2)}
\`\`\`
`;
  const path = join(dir, 'report.md');
  writeFileSync(path, md);
  return path;
}
