/**
 * The research system against controls whose answer is known: `npm run bench -- research [--json] [--seeds N]
 * [--steps N]`.
 *
 *   positive control   learning rate 0 vs the default (5e-4): training must be declared better, its CI excluding 0
 *   negative control   two identical arms (the default) on different seeds: no difference may be declared
 *
 * Both are real studies on one peer (built-in model, calculator agent, held-out success after a few steps), run one
 * after the other; the figures are the studies' own analyses.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StudyDetail, StudySummary } from '../swarm/common/research-api.ts';
import { PeerClient } from '../swarm/node/cli/peer-client.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import { type BenchContext, formatTable } from './report.ts';

const repoFile = (path: string) => new URL(`../${path}`, import.meta.url).pathname;
/** How often the bench looks at a running study. */
const POLL_MS = 3000;

function argOf(ctx: BenchContext, flag: string, fallback: number): number {
  const at = ctx.args.indexOf(flag);
  return at >= 0 ? Number(ctx.args[at + 1]) : fallback;
}

function study(name: string, arms: string, decision: string, seeds: number, steps: number): string {
  return `name: ${name}
question: ${name === 'positive-control' ? 'Does training (the default learning rate) beat not training (learning rate 0)?' : 'Do two identical arms differ?'}
hypothesis: ${name === 'positive-control' ? 'Training beats not training.' : 'They do not.'}
decision: ${decision}
base:
  model: builtin:tiny
  script: ${repoFile('examples/calculator/agent.ts')}
  reward: ${repoFile('examples/calculator/reward.ts')}
  tasks: { calculator: { train: 400, eval: 40, seed: 7 } }
  training: { batchTasks: 2, groupSize: 4 }
  evalConcurrency: 10
metric: { kind: final-eval-success }
stages:
  - name: main
    steps: ${steps}
    seeds: ${seeds}
    arms:
${arms}
concurrency: 2
`;
}

export default async function researchBench(ctx: BenchContext) {
  const seeds = argOf(ctx, '--seeds', 3);
  const steps = argOf(ctx, '--steps', 4);
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bench-research-'));
  const started = performance.now();
  const runtime = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'silent' });
  const api = new PeerClient(runtime.urls.api, runtime.token);
  try {
    const run = async (text: string): Promise<StudyDetail> => {
      const created = await api.request<StudySummary>('POST', '/studies', { text, baseDir: dataDir });
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        const detail = await api.get<StudyDetail>(`/studies/${created.id}`);
        const done = detail.studyRuns.filter((r) => r.status !== 'pending' && r.status !== 'running').length;
        ctx.log(`${detail.name}: ${done}/${detail.studyRuns.length} runs (${((performance.now() - started) / 1000).toFixed(0)} s)`);
        if (['done', 'failed', 'stopped'].includes(detail.status)) return detail;
      }
    };
    const positive = await run(
      study(
        'positive-control',
        `      - { name: lr-0, training: { train: { learningRate: 0 } } }\n      - { name: default, training: {} }`,
        '{ kind: difference, better: default, than: lr-0, minDifference: 0 }',
        seeds,
        steps,
      ),
    );
    // Identical arms told apart by their seeds only: an arm's training seed offsets its runs' seeds.
    const negative = await run(
      study('negative-control', '      - { name: a, training: {} }\n      - { name: b, training: { seed: 1000 } }', '{ kind: difference, better: b, than: a, minDifference: 0 }', seeds, steps),
    );
    const means = (detail: StudyDetail) => Object.fromEntries((detail.analysis?.arms ?? []).map((a) => [a.arm, a.mean]));
    const positiveDecision = positive.analysis?.decision;
    const negativeDecision = negative.analysis?.decision;
    const result = {
      wall_s: Math.round((performance.now() - started) / 1000),
      runs: positive.studyRuns.length + negative.studyRuns.length,
      seeds_per_arm: seeds,
      steps_per_run: steps,
      positive_detected: positiveDecision?.outcome === 'met',
      negative_false_positive: negativeDecision?.outcome === 'met',
      ci_width: positiveDecision?.low !== null && positiveDecision?.high !== null && positiveDecision ? Math.round((positiveDecision.high! - positiveDecision.low!) * 1000) / 1000 : null,
      positive_means: means(positive),
      negative_means: means(negative),
      positive_statement: positiveDecision?.statement ?? positive.reason,
      negative_statement: negativeDecision?.statement ?? negative.reason,
    };
    console.log(
      formatTable([
        { study: 'positive control', decision: positiveDecision?.outcome ?? positive.status, ...prefixed(result.positive_means), ci_low: positiveDecision?.low ?? null, ci_high: positiveDecision?.high ?? null },
        { study: 'negative control', decision: negativeDecision?.outcome ?? negative.status, ...prefixed(result.negative_means), ci_low: negativeDecision?.low ?? null, ci_high: negativeDecision?.high ?? null },
      ]),
    );
    console.log(`wall ${result.wall_s} s, ${result.runs} runs; positive detected: ${result.positive_detected}; negative false positive: ${result.negative_false_positive}`);
    return result;
  } finally {
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function prefixed(means: Record<string, number | null>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(means).map(([arm, value]) => [`mean_${arm}`, value === null ? null : Math.round(value * 1000) / 1000]));
}
