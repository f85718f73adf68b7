/**
 * A run's report from a seeded store: every plot written and linked, titles whole, legends below the plot, labelled
 * markers drawn, KL marked off when the run has no KL penalty, and a long run's curves thinned to a bounded size.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openOfflineStore } from '../cli/offline-store.ts';
import { MAX_PLOTTED_STEPS, readRunReport } from './run-report-data.ts';
import { PLOT_IDS, runPlots } from './run-plots.ts';
import { writeRunReport } from './run-report.ts';
import { seedLongRun, seedRuns } from './testing/seed-runs.ts';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-run-report-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function reportOf(seed: (dir: string) => void, runId: string) {
  const data = tempDir();
  seed(data);
  const db = openOfflineStore(data);
  try {
    return readRunReport(db, runId);
  } finally {
    db.close();
  }
}

const attr = (tag: string, name: string) => Number(new RegExp(`${name}="([-\\d.]+)"`).exec(tag)?.[1]);
const unescape = (text: string) => text.replace(/&apos;/g, "'").replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

describe('run report', () => {
  it('writes every plot and links it from report.md, with whole titles and legends below the plot', () => {
    const data = reportOf(seedRuns, 'tiny-1');
    const out = tempDir();
    const written = writeRunReport(data, out, { markers: { success: [{ x: 0, y: 0.12, label: 'before 12%' }] } });
    const md = readFileSync(written.report, 'utf8');
    const plots = runPlots(data);
    expect(plots.map((p) => p.id)).toEqual([...PLOT_IDS]);
    for (const plot of plots) {
      expect(md).toContain(`](${plot.file})`);
      const svg = readFileSync(join(out, plot.file), 'utf8');
      const title = /<text data-role="title"[^>]*>(.*?)<\/text>/.exec(svg)![1];
      const lines = [...title.matchAll(/<tspan[^>]*>(.*?)<\/tspan>/g)].map((m) => unescape(m[1]));
      expect(lines.join(' ')).toBe(plot.title);
      const area = /<rect data-role="plot-area"[^>]*>/.exec(svg)![0];
      const plotBottom = attr(area, 'y') + attr(area, 'height');
      for (const item of svg.matchAll(/data-role="legend-item" data-y="([-\d.]+)"/g)) expect(Number(item[1])).toBeGreaterThan(plotBottom);
    }
    expect(readFileSync(join(out, 'success.svg'), 'utf8')).toMatch(/data-role="marker".*before 12%/s);
    expect(written.files.at(-1)).toBe(written.report);
  });

  it('draws the run’s steps, held-out evals and rollouts at the steps they belong to', () => {
    const data = reportOf(seedRuns, 'tiny-1');
    const plots = Object.fromEntries(runPlots(data).map((p) => [p.id, p]));
    expect(plots.reward.series[0].points.map((p) => p.x)).toEqual([1, 2, 3, 4, 5]);
    expect(plots.eval.series[0].points.map((p) => p.x)).toEqual([0, 5]);
    // Rollouts on the weights after step N−1 fed step N; those on the last weights fed none.
    expect(plots.success.series[1].points.map((p) => p.x)).toEqual([1, 2, 3, 4, 5]);
    expect(plots.calls.series[0].points.length).toBe(5);
    expect(plots.kl.series.length).toBe(1);
    expect(data.mergeTotals).toEqual({ naive: 5 * 300, merged: 5 * 100 });
  });

  it('thins a long run’s curves, keeps its last step, and marks KL off when the run has no KL penalty', () => {
    const steps = MAX_PLOTTED_STEPS + 500;
    const data = reportOf((dir) => seedLongRun(dir, steps), 'long-1');
    expect(data.stride).toBe(2);
    expect(data.steps.length).toBeLessThanOrEqual(MAX_PLOTTED_STEPS + 1);
    expect(data.steps.at(-1)!.step).toBe(steps);
    const kl = runPlots(data).find((p) => p.id === 'kl')!;
    expect(kl.series).toEqual([]);
    expect(kl.title).toMatch(/off/);
    const out = tempDir();
    writeRunReport(data, out);
    expect(readFileSync(join(out, 'kl.svg'), 'utf8')).not.toContain('<polyline');
  });
});
