/**
 * The demo's run folder: the run's report (swarm/node/report/run-report.ts, the same one `agentjet runs report`
 * writes, read from the demo peer's store) plus what only the demo knows: its held-out evaluation before and after
 * training (both labelled on the success plots) and summary.json with its own per-step measurements.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PointMarker } from '../../common/charts/svg-chart.ts';
import { openOfflineStore } from '../cli/offline-store.ts';
import { markdownTable, pct } from '../report/run-format.ts';
import { readRunReport } from '../report/run-report-data.ts';
import { writeRunReport } from '../report/run-report.ts';
import { DemoError, type DemoResult } from './demo.ts';

/** Held-out before/after as labelled points: "before 12%" at the starting weights, "after 74%" at the last step. */
export function heldOutMarkers(result: Pick<DemoResult, 'eval_before' | 'eval_after'>, lastStep: number): PointMarker[] {
  const label = (word: string, rate: number) => `${word} ${Math.round(rate * 100)}%`;
  return [
    { x: 0, y: result.eval_before, label: label('before', result.eval_before), colour: '#6b7280' },
    { x: lastStep, y: result.eval_after, label: label('after', result.eval_after), colour: '#111827' },
  ];
}

function heldOutSection(result: DemoResult): string {
  const b = result.evalBefore;
  const a = result.evalAfter;
  const row = (when: string, e: typeof b) => [when, pct(e.successRate), e.meanReward.toFixed(3), String(e.aborted), `${e.wallS.toFixed(0)} s`];
  const trained = result.tasks.reduce((n, t) => n + t.trainedEpisodes, 0);
  const perTask =
    result.tasks.length > 1
      ? `\n\nEach task apart (the summary above and the plots' labels take their mean; the rollouts were shared by weight, and "trained" is each task's share of the episodes the steps trained on):\n\n${markdownTable(
          ['task', 'agent', 'weight', 'trained', 'held-out tasks', 'before', 'after', 'change'],
          result.tasks.map((t) => [t.name, t.script.split('/').slice(-2).join('/'), String(t.weight), `${t.trainedEpisodes} (${pct(t.trainedEpisodes / Math.max(1, trained))})`, String(t.evalAfter.episodes), pct(t.evalBefore.successRate), pct(t.evalAfter.successRate), `${((t.evalAfter.successRate - t.evalBefore.successRate) * 100).toFixed(1)} pp`]),
        )}`
      : '';
  const roles = result.tasks.flatMap((t) => Object.entries(t.roles ?? {}).map(([role, r]) => [role, r.model, r.before.toFixed(3), r.after.toFixed(3), `${(r.after - r.before >= 0 ? '+' : '')}${(r.after - r.before).toFixed(3)}`]));
  const perRole = roles.length
    ? `\n\nEach role's own metric: its mean reward on the held-out tasks (each role's model trained only on its role's episodes; the plots follow ${result.models[0].name}, the other models' steps are in summary.json):\n\n${markdownTable(['role', 'model', 'before', 'after', 'change'], roles)}`
    : '';
  const metrics = result.tasks.flatMap((t) =>
    Object.entries(t.metrics).map(([name, m]) => [
      ...(result.tasks.length > 1 ? [t.name] : []),
      name,
      m.before === null ? '–' : m.before.toFixed(3),
      m.after === null ? '–' : m.after.toFixed(3),
      m.before === null || m.after === null ? '–' : `${m.after - m.before >= 0 ? '+' : ''}${(m.after - m.before).toFixed(3)}`,
      `${m.episodesBefore} / ${m.episodesAfter}`,
    ]),
  );
  const perMetric = metrics.length
    ? `\n\nThe metrics the agent script reports: each one's mean over the held-out episodes that reported it:\n\n${markdownTable([...(result.tasks.length > 1 ? ['task'] : []), 'metric', 'before', 'after', 'change', 'episodes (before / after)'], metrics)}`
    : '';
  return `## Held-out success (${b.episodes} tasks, never trained on)

The demo's own evaluation (scenario: ${result.scenario}): every held-out task once on the starting weights, and again on the
trained ones (share of eval episodes that reported success; aborted ones count as failures). Labelled "before"/"after" on
the success plots.

${markdownTable(['', 'success', 'mean reward', 'aborted', 'wall time'], [row('before training', b), row('after training', a)])}${perTask}${perRole}${perMetric}

Change: **${((a.successRate - b.successRate) * 100).toFixed(1)} percentage points**. Policy version ${result.policyVersionBefore} → ${result.policyVersionAfter}.
Model ${result.model} on ${result.backend}, ${result.steps} training steps, ${result.episodes} episodes, ${result.wall_s} s wall time; agents ran ${result.agentsRun}.

Demo settings:

\`\`\`json
${JSON.stringify(result.options, null, 2)}
\`\`\``;
}

/** Writes the run folder's report and summary.json; returns report.md's path. */
export function writeDemoReport(result: DemoResult): string {
  if (!result.runId) throw new DemoError(`no training run of ${result.modelName} was recorded in ${result.dataDir}`);
  writeFileSync(join(result.outDir, 'summary.json'), JSON.stringify(result, null, 2) + '\n');
  const db = openOfflineStore(result.dataDir);
  try {
    const data = readRunReport(db, result.runId);
    const markers = heldOutMarkers(result, data.detail.lastStep);
    return writeRunReport(data, result.outDir, { title: 'AgentJet demo run', intro: heldOutSection(result), markers: { success: markers, eval: markers } }).report;
  } finally {
    db.close();
  }
}
