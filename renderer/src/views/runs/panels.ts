/**
 * The training charts, as data: steps + held-out evals + config of one or more runs → one spec per panel, each
 * with one series per run (two for tokens/s, policy lag and busy shares). The one home of what the panels are; the run
 * page, the comparison and the Models page all draw these with RunChart. Pure, cached per steps array.
 */
import type { RunStep, TrainStepSummary } from '../../../../swarm/common/api.ts';
import type { RunEvalPoint, RunEvent } from '../../../../swarm/common/runs-api.ts';
import type { ChartFormat, ChartMarker, ChartSeries } from '../charts/chart-types.ts';

/** What a panel is drawn from: one run (or, on the Models page without a run, one model's steps). */
export interface PanelSource {
  key: string;
  label: string;
  colour: string;
  /** Oldest first. A RunStep is plotted at its `runStep`, a model's step at its `step`. */
  steps: readonly (TrainStepSummary | RunStep)[];
  evals?: readonly RunEvalPoint[];
  /** The resolved training configuration (RunDetail.config / the loop's config), for what a panel is off by. */
  config?: Record<string, unknown> | null;
  events?: readonly RunEvent[];
}

export const PANEL_IDS = [
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
  'tokens-per-s',
  'policy-lag',
  'busy',
  'stale',
  'merge-savings',
  'tree-savings',
] as const;
export type PanelId = (typeof PANEL_IDS)[number];

export interface PanelSpec {
  id: PanelId;
  title: string;
  series: ChartSeries[];
  markers: ChartMarker[];
  format: ChartFormat;
  yDomain?: [number, number];
  logScaleAllowed?: boolean;
  /** Why the panel has nothing to draw (shown in its place), or null. */
  off: string | null;
}

/**
 * More checkpoint markers than this per run would cover the plot with lines (a checkpoint every step); past it
 * the checkpoints are left to the run's checkpoint table.
 */
export const MAX_CHECKPOINT_MARKERS = 50;

type Column = (number | null)[];

/** The steps as plot columns. */
export interface StepColumns {
  x: number[];
  rewardMean: Column;
  rewardLower: Column;
  rewardUpper: Column;
  success: Column;
  loss: Column;
  kl: Column;
  clip: Column;
  entropy: Column;
  gradNorm: Column;
  responseTokens: Column;
  discardedShare: Column;
  updateTokensPerS: Column;
  rolloutTokensPerS: Column;
  policyLag: Column;
  policyLagMax: Column;
  trainerBusy: Column;
  samplerBusy: Column;
  droppedStale: Column;
  mergeRatio: Column;
  treeRatio: Column;
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

const columnsCache = new WeakMap<readonly (TrainStepSummary | RunStep)[], StepColumns>();

export function stepColumns(steps: readonly (TrainStepSummary | RunStep)[]): StepColumns {
  const cached = columnsCache.get(steps);
  if (cached) return cached;
  const c: StepColumns = {
    x: [],
    rewardMean: [],
    rewardLower: [],
    rewardUpper: [],
    success: [],
    loss: [],
    kl: [],
    clip: [],
    entropy: [],
    gradNorm: [],
    responseTokens: [],
    discardedShare: [],
    updateTokensPerS: [],
    rolloutTokensPerS: [],
    policyLag: [],
    policyLagMax: [],
    trainerBusy: [],
    samplerBusy: [],
    droppedStale: [],
    mergeRatio: [],
    treeRatio: [],
  };
  for (const s of steps) {
    c.x.push('runStep' in s ? s.runStep : s.step);
    const mean = num(s.rewardMean);
    const std = num(s.rewardStd);
    c.rewardMean.push(mean);
    c.rewardLower.push(mean !== null && std !== null ? mean - std : null);
    c.rewardUpper.push(mean !== null && std !== null ? mean + std : null);
    c.success.push(num(s.successRate));
    c.loss.push(num(s.metrics.loss));
    c.kl.push(num(s.metrics.kl));
    c.clip.push(num(s.metrics.clipFraction));
    c.entropy.push(num(s.metrics.entropy));
    c.gradNorm.push(num(s.metrics.gradNorm));
    c.responseTokens.push(num(s.responseTokensMean));
    c.discardedShare.push(num(s.discardedShare));
    c.updateTokensPerS.push(s.metrics.timeMs > 0 ? num((s.metrics.tokens / s.metrics.timeMs) * 1000) : null);
    c.rolloutTokensPerS.push(num(s.rolloutTokensPerS));
    c.policyLag.push(num(s.policyLagMean));
    c.policyLagMax.push(num(s.policyLagMax));
    // The update's share of the step's wall time (rollout since the last step, drain, update).
    const phases = s.phases;
    const wall = phases ? phases.rolloutMs + phases.drainMs + phases.updateMs : 0;
    c.trainerBusy.push(phases && wall > 0 ? phases.updateMs / wall : null);
    c.samplerBusy.push(num(s.samplerBusyShare));
    c.droppedStale.push(num(s.droppedStale));
    const naive = num(s.naiveTokens);
    c.mergeRatio.push(naive !== null && s.metrics.tokens > 0 ? naive / s.metrics.tokens : null);
    // Tree packing: the tokens the update computed (a group's shared context once); absent on older steps.
    const computed = s.metrics.packing === 'tree' ? num(s.metrics.computedTokens) : null;
    c.treeRatio.push(naive !== null && computed !== null && computed > 0 ? naive / computed : null);
  }
  columnsCache.set(steps, c);
  return c;
}

function hasValues(values: readonly (number | null)[]): boolean {
  return values.some((v) => v !== null);
}

/** A dotted value of a config (`train.klCoef`), undefined where absent. */
export function configValue(config: Record<string, unknown> | null | undefined, path: string): unknown {
  let value: unknown = config;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

interface ColumnPanel {
  id: PanelId;
  title: string;
  column: keyof Omit<StepColumns, 'x'>;
  format: ChartFormat;
  /** Shown when no step of any run reports the value. */
  missing: string;
  yDomain?: [number, number];
  logScaleAllowed?: boolean;
}

const COLUMN_PANELS: readonly ColumnPanel[] = [
  { id: 'success', title: 'Success', column: 'success', format: 'percent', yDomain: [0, 1], missing: 'No episode reported a success flag' },
  { id: 'loss', title: 'PPO loss', column: 'loss', format: 'number', missing: 'No step reports a loss' },
  { id: 'kl', title: 'KL to reference', column: 'kl', format: 'number', missing: 'No step reports KL' },
  { id: 'clip', title: 'Clip fraction', column: 'clip', format: 'percent', missing: 'No step reports a clip fraction' },
  { id: 'entropy', title: 'Entropy', column: 'entropy', format: 'number', missing: 'No step reports entropy' },
  { id: 'grad-norm', title: 'Gradient norm', column: 'gradNorm', format: 'number', logScaleAllowed: true, missing: 'No step reports a gradient norm' },
  { id: 'response-length', title: 'Response length (tokens)', column: 'responseTokens', format: 'compact', missing: 'No step reports a response length' },
  { id: 'discarded', title: 'Discarded groups (uniform reward)', column: 'discardedShare', format: 'percent', yDomain: [0, 1], missing: 'No step reports discarded groups' },
  { id: 'stale', title: 'Episodes dropped as stale', column: 'droppedStale', format: 'number', missing: 'No step reports stale drops' },
  { id: 'merge-savings', title: 'Merge savings (naive ÷ merged tokens)', column: 'mergeRatio', format: 'ratio', missing: 'No step reports naive tokens' },
  { id: 'tree-savings', title: 'Tree savings (naive ÷ tree tokens)', column: 'treeRatio', format: 'ratio', missing: 'No step trained on a prefix tree' },
];

const NO_STEPS = 'No optimizer step yet';

/** The panels for `sources` (one run: its page; several: the comparison), in display order. */
export function buildPanels(sources: readonly PanelSource[]): PanelSpec[] {
  const columns = sources.map((s) => stepColumns(s.steps));
  const anySteps = columns.some((c) => c.x.length > 0);
  const markers = eventMarkers(sources);
  const many = sources.length > 1;
  const name = (source: PanelSource, what: string) => (many ? `${source.label} · ${what}` : what);

  const spec = (id: PanelId, title: string, format: ChartFormat, series: ChartSeries[], missing: string, extra: Partial<PanelSpec> = {}): PanelSpec => ({
    id,
    title,
    format,
    series,
    markers,
    off: !anySteps && id !== 'eval' ? NO_STEPS : series.some((s) => hasValues(s.y)) ? null : missing,
    ...extra,
  });

  // A band per run would bury an overlay of several: the spread is shown for one run only.
  const banded = sources.length === 1;
  const reward = spec(
    'reward',
    banded ? 'Reward (mean ± std)' : 'Reward (mean)',
    'number',
    sources.map((source, i) => {
      const c = columns[i];
      return {
        key: source.key,
        label: name(source, 'mean'),
        x: c.x,
        y: c.rewardMean,
        colour: source.colour,
        band: banded && hasValues(c.rewardLower) ? { lower: c.rewardLower, upper: c.rewardUpper } : undefined,
      };
    }),
    'No step reports a reward',
  );

  const byColumn = new Map(
    COLUMN_PANELS.map((p) => [
      p.id,
      spec(
        p.id,
        p.title,
        p.format,
        sources.map((source, i) => ({ key: source.key, label: source.label, x: columns[i].x, y: columns[i][p.column], colour: source.colour })),
        p.missing,
        { yDomain: p.yDomain, logScaleAllowed: p.logScaleAllowed },
      ),
    ]),
  );

  // KL is measured whatever its coefficient; with no penalty it does not steer training, so the panel says so.
  const kl = byColumn.get('kl')!;
  if (anySteps && sources.every((s) => configValue(s.config, 'train.klCoef') === 0)) kl.off = 'KL penalty off (klCoef 0)';

  /** Two series per run in the run's colour, the second dashed (panels that show two measures of one thing). */
  type Measure = { key: string; label: string; column: keyof Omit<StepColumns, 'x'> };
  const solidAndDashed = (solid: Measure, dashed: Measure): ChartSeries[] =>
    sources.flatMap((source, i) => [
      { key: `${source.key}:${solid.key}`, label: name(source, solid.label), x: columns[i].x, y: columns[i][solid.column], colour: source.colour },
      { key: `${source.key}:${dashed.key}`, label: name(source, dashed.label), x: columns[i].x, y: columns[i][dashed.column], colour: source.colour, dashed: true },
    ]);

  const tokens = spec(
    'tokens-per-s',
    'Tokens / s (update, rollout dashed)',
    'compact',
    solidAndDashed({ key: 'update', label: 'update', column: 'updateTokensPerS' }, { key: 'rollout', label: 'rollout', column: 'rolloutTokensPerS' }),
    'No step reports its time',
  );

  const lag = spec(
    'policy-lag',
    'Policy lag (versions: mean, max dashed)',
    'number',
    solidAndDashed({ key: 'lag', label: 'mean', column: 'policyLag' }, { key: 'lag-max', label: 'max', column: 'policyLagMax' }),
    'No step reports policy lag',
  );

  const busy = spec(
    'busy',
    'Busy share of the step (trainer, sampler dashed)',
    'percent',
    solidAndDashed({ key: 'trainer', label: 'trainer', column: 'trainerBusy' }, { key: 'sampler', label: 'sampler', column: 'samplerBusy' }),
    'No step reports its phases',
    { yDomain: [0, 1] },
  );

  const evalSeries = heldOutEvalSeries(sources);
  const evalPanel = spec('eval', evalSeries.title, evalSeries.format, evalSeries.series, evalOffReason(sources), evalSeries.format === 'percent' ? { yDomain: [0, 1] } : {});

  const ordered: Record<PanelId, PanelSpec> = {
    ...(Object.fromEntries(byColumn) as Record<Exclude<PanelId, 'reward' | 'eval' | 'tokens-per-s' | 'policy-lag' | 'busy'>, PanelSpec>),
    reward,
    eval: evalPanel,
    'tokens-per-s': tokens,
    'policy-lag': lag,
    busy,
  };
  return PANEL_IDS.map((id) => ordered[id]);
}

/** Success on the held-out tasks per evaluated step; the mean reward where no eval episode reported success. */
function heldOutEvalSeries(sources: readonly PanelSource[]): { title: string; format: ChartFormat; series: ChartSeries[] } {
  const evals = sources.map((s) => s.evals ?? []);
  const bySuccess = evals.some((points) => points.some((p) => p.successRate !== null));
  return {
    title: bySuccess ? 'Held-out eval (success)' : 'Held-out eval (mean reward)',
    format: bySuccess ? 'percent' : 'number',
    series: sources.map((source, i) => ({
      key: `${source.key}:eval`,
      label: source.label,
      x: evals[i].map((p) => p.step),
      y: evals[i].map((p) => (bySuccess ? p.successRate : p.meanReward)),
      colour: source.colour,
    })),
  };
}

function evalOffReason(sources: readonly PanelSource[]): string {
  return sources.every((s) => configValue(s.config, 'evalEvery') === 0) ? 'Held-out eval off (evalEvery 0)' : 'No held-out eval yet';
}

/** The runs' events as markers (named by run when several are overlaid); checkpoints only while they are few. */
export function eventMarkers(sources: readonly PanelSource[]): ChartMarker[] {
  const many = sources.length > 1;
  const markers: ChartMarker[] = [];
  for (const source of sources) {
    const events = source.events ?? [];
    const checkpoints = events.filter((e) => e.kind === 'checkpoint').length;
    for (const event of events) {
      if (event.kind === 'checkpoint' && checkpoints > MAX_CHECKPOINT_MARKERS) continue;
      markers.push({ x: event.step, kind: event.kind, label: many ? `${source.label}: ${event.label}` : event.label });
    }
  }
  return markers;
}
