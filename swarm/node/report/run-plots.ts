/**
 * The plots of a run's report: which numbers each one draws, from which population, and how it is titled and
 * captioned so that a reader knows what a line counts (the trained batch, every train rollout, or held-out eval).
 *
 * Two x meanings, said in every caption: a step's own numbers (its batch, its update) sit at that step; rollouts
 * and evals sit at the step whose weights ran them — for rollouts shifted by one, to the step they fed (rollouts
 * on the weights after step N−1 make up step N's batch), so the two train lines compare like for like.
 */
import type { ChartFormat } from '../../common/charts/format.ts';
import type { EventMarker, PointMarker, Series } from '../../common/charts/svg-chart.ts';
import type { RunEvent } from '../../common/runs-api.ts';
import type { ReportStep, RunReportData } from './run-report-data.ts';

export const PLOT_IDS = [
  'reward',
  'success',
  'eval',
  'loss',
  'kl',
  'clip',
  'entropy',
  'grad-norm',
  'response-length',
  'discarded',
  'throughput',
  'merge',
  'calls',
] as const;
export type PlotId = (typeof PLOT_IDS)[number];

export interface Plot {
  id: PlotId;
  file: string;
  title: string;
  /** One or two sentences under the plot in report.md: what each line counts. */
  caption: string;
  yLabel: string;
  format: ChartFormat;
  yDomain?: [number, number];
  series: Series[];
  /** Labelled points (e.g. the demo's held-out before/after). */
  markers: PointMarker[];
  events: EventMarker[];
}

/** Events drawn on the step plots; more would crowd the labels above the plot (the events table lists them all). */
export const MAX_CHART_EVENTS = 8;
/** An event label above a plot is cut to this many characters (its full text is in the events table). */
const EVENT_LABEL_MAX = 28;
/** Events worth a line through every plot: what changed the training, not the routine checkpoints. */
const CHARTED_EVENT_KINDS: ReadonlySet<RunEvent['kind']> = new Set(['config-change', 'hot-swap', 'revert', 'resume']);

type Point = { x: number; y: number };

const finite = (v: number | null | undefined): v is number => v !== null && v !== undefined && Number.isFinite(v);

function stepPoints(steps: readonly ReportStep[], value: (s: ReportStep) => number | null): Point[] {
  return steps.flatMap((s) => {
    const y = value(s);
    return finite(y) ? [{ x: s.step, y }] : [];
  });
}

function chartEvents(events: readonly RunEvent[]): EventMarker[] {
  const shown = events.filter((e) => CHARTED_EVENT_KINDS.has(e.kind)).slice(-MAX_CHART_EVENTS);
  return shown.map((e) => {
    const text = `${e.kind}: ${e.label}`;
    return { x: e.step, label: text.length > EVENT_LABEL_MAX ? `${text.slice(0, EVENT_LABEL_MAX - 1)}…` : text };
  });
}

export function klIsOff(config: Record<string, unknown>): boolean {
  const train = config.train as { klCoef?: unknown } | undefined;
  return train?.klCoef === 0;
}

/** The plots of the run; `markers` adds labelled points to plots by id (the demo's held-out before/after). */
export function runPlots(data: RunReportData, markers: Partial<Record<PlotId, PointMarker[]>> = {}): Plot[] {
  const s = data.steps;
  const lastStep = data.detail.lastStep;
  // Rollouts on the weights after step N feed step N+1; those on the final weights fed no step yet.
  const fed = data.rollouts.filter((r) => r.step + 1 <= lastStep).map((r) => ({ ...r, x: r.step + 1 }));
  const events = chartEvents(data.detail.events);
  const plot = (p: Omit<Plot, 'file' | 'markers' | 'events' | 'format'> & { format?: ChartFormat }): Plot => ({
    format: 'number',
    ...p,
    file: `${p.id}.svg`,
    markers: markers[p.id] ?? [],
    events,
  });
  const kl = klIsOff(data.detail.config);
  const thinned = data.stride > 1 ? ` Every ${data.stride}th step is drawn.` : '';
  return [
    plot({
      id: 'reward',
      title: 'Reward per step: the trained batch and all train rollouts',
      caption:
        'Batch reward: mean (± std, shaded) over the episodes of the groups the step trained on — groups whose episodes all had the same reward are left out. ' +
        'All rollouts: mean over every finished train episode that fed the step (sampled on the previous step’s weights), left-out groups and aborted episodes included.' +
        thinned,
      yLabel: 'mean reward',
      series: [
        {
          name: 'batch reward (trained groups)',
          points: stepPoints(s, (x) => x.rewardMean),
          band: s.filter((x) => finite(x.rewardStd)).map((x) => ({ x: x.step, low: x.rewardMean - x.rewardStd!, high: x.rewardMean + x.rewardStd! })),
        },
        { name: 'all train rollouts', points: fed.flatMap((r) => (finite(r.meanReward) ? [{ x: r.x, y: r.meanReward }] : [])), dashed: true },
      ],
    }),
    plot({
      id: 'success',
      title: 'Success per step: the trained batch and all train rollouts',
      caption:
        'Share of episodes whose own success flag is true (an episode without one counts as not successful). Batch: the groups the step trained on. ' +
        'All rollouts: every finished train episode that fed the step, aborted ones as failures.' +
        thinned,
      yLabel: 'success (share of episodes)',
      format: 'percent',
      yDomain: [0, 1],
      series: [
        { name: 'batch success (trained groups)', points: stepPoints(s, (x) => x.successRate) },
        { name: 'all train rollouts', points: fed.flatMap((r) => (finite(r.successRate) ? [{ x: r.x, y: r.successRate }] : [])), dashed: true },
      ],
    }),
    plot({
      id: 'eval',
      title: 'Held-out eval success by the weights it ran on',
      caption:
        'Eval episodes (tasks marked "split": "eval", never trained on) of the run, per policy version, at the step that produced the weights (0: the weights the run started from). Aborted eval episodes count as failures.',
      yLabel: 'held-out success',
      format: 'percent',
      yDomain: [0, 1],
      series: [{ name: 'held-out success (eval episodes)', points: data.evals.flatMap((e) => (finite(e.successRate) ? [{ x: e.step, y: e.successRate }] : [])) }],
    }),
    plot({ id: 'loss', title: 'Policy loss per step', caption: 'The optimizer step’s loss over the trained batch.', yLabel: 'loss', series: [{ name: 'loss', points: stepPoints(s, (x) => x.loss) }] }),
    plot({
      id: 'kl',
      title: kl ? 'KL to the reference weights: off (train.klCoef is 0)' : 'KL to the reference weights per step (k3, per token)',
      caption: kl ? 'The KL penalty is off for this run (train.klCoef = 0): there is no reference model, so no KL is measured.' : 'Mean per-token KL estimate (k3) of the trained batch against the reference weights.',
      yLabel: 'KL per token',
      series: kl ? [] : [{ name: 'KL', points: stepPoints(s, (x) => x.kl) }],
    }),
    plot({
      id: 'clip',
      title: 'Clip fraction per step',
      caption: 'Share of the batch’s trained tokens whose probability ratio was clipped (PPO).',
      yLabel: 'clipped tokens (share)',
      format: 'percent',
      series: [{ name: 'clip fraction', points: stepPoints(s, (x) => x.clipFraction) }],
    }),
    plot({ id: 'entropy', title: 'Policy entropy per step', caption: 'Mean per-token entropy of the policy over the batch’s trained tokens.', yLabel: 'entropy (nats per token)', series: [{ name: 'entropy', points: stepPoints(s, (x) => x.entropy) }] }),
    plot({ id: 'grad-norm', title: 'Gradient norm per step', caption: 'The global norm of the update’s gradient.', yLabel: 'gradient norm', series: [{ name: 'grad norm', points: stepPoints(s, (x) => x.gradNorm) }] }),
    plot({
      id: 'response-length',
      title: 'Response length per step',
      caption: 'Mean tokens the policy generated per episode of the trained batch.',
      yLabel: 'generated tokens per episode',
      series: [{ name: 'response tokens', points: stepPoints(s, (x) => x.responseTokensMean) }],
    }),
    plot({
      id: 'discarded',
      title: 'Discarded groups per step (all rewards equal)',
      caption: 'Share of the groups completed since the previous step that were left out because every episode in them had the same reward (nothing to learn from).',
      yLabel: 'discarded groups (share)',
      format: 'percent',
      yDomain: [0, 1],
      series: [{ name: 'discarded share', points: stepPoints(s, (x) => x.discardedShare) }],
    }),
    plot({
      id: 'throughput',
      title: 'Tokens per second per step',
      caption: 'Trainer: tokens the update processed per second of its own time. Rollout: tokens the batch’s episodes generated per second of the rollout phase.',
      yLabel: 'tokens/s',
      format: 'compact',
      series: [
        { name: 'trainer', points: stepPoints(s, (x) => x.trainerTokensPerS) },
        { name: 'rollout (generation)', points: stepPoints(s, (x) => x.rolloutTokensPerS) },
      ],
    }),
    plot({
      id: 'merge',
      title: 'Timeline merge savings per step: naive ÷ merged tokens',
      caption: 'Tokens the batch would hold with one sample per LLM call, over the tokens its merged timelines hold (1×: no saving).',
      yLabel: 'naive ÷ merged tokens',
      format: 'ratio',
      series: [{ name: 'merge token ratio', points: stepPoints(s, (x) => x.mergeRatio) }],
    }),
    plot({
      id: 'calls',
      title: 'LLM calls per train episode (the agent’s tool use)',
      caption: 'Mean LLM calls over every finished train episode that fed the step (1: answered at once, more: used tools or retried).',
      yLabel: 'calls per episode',
      series: [{ name: 'calls per episode', points: fed.flatMap((r) => (finite(r.callsMean) ? [{ x: r.x, y: r.callsMean }] : [])) }],
    }),
  ];
}
