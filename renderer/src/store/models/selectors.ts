import type { StatusPayload, TrainStepSummary } from '../../../../swarm/common/api.ts';
import { emptyTraining, type ModelsState, type ModelTraining } from './slice.ts';

function training(models: ModelsState, name: string | null): ModelTraining {
  return (name && models.byModel[name]) || emptyTraining;
}

/** Columns for the charts: x = step; a value is null where the step did not report it. */
export interface StepSeries {
  step: number[];
  rewardMean: (number | null)[];
  /** Standard deviation of the batch's rewards, when steps report it (`rewardStd`). */
  rewardStd: (number | null)[];
  /** Share of the batch's episodes whose own `success` is true, when steps report it (`successRate`). */
  success: (number | null)[];
  loss: (number | null)[];
  kl: (number | null)[];
  clipFraction: (number | null)[];
  entropy: (number | null)[];
  gradNorm: (number | null)[];
  tokensPerSecond: (number | null)[];
  /** Naive ÷ merged tokens of the step's samples, when steps report `naiveTokens`. */
  mergeRatio: (number | null)[];
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

const seriesCache = new WeakMap<readonly TrainStepSummary[], StepSeries>();

/** The steps as plot columns; cached per steps array, so selecting it repeatedly builds nothing new. */
function stepSeries(steps: readonly TrainStepSummary[]): StepSeries {
  const cached = seriesCache.get(steps);
  if (cached) return cached;
  const series: StepSeries = {
    step: [],
    rewardMean: [],
    rewardStd: [],
    success: [],
    loss: [],
    kl: [],
    clipFraction: [],
    entropy: [],
    gradNorm: [],
    tokensPerSecond: [],
    mergeRatio: [],
  };
  for (const s of steps) {
    series.step.push(s.step);
    series.rewardMean.push(num(s.rewardMean));
    series.rewardStd.push(num(s.rewardStd));
    series.success.push(num(s.successRate));
    series.loss.push(num(s.metrics.loss));
    series.kl.push(num(s.metrics.kl));
    series.clipFraction.push(num(s.metrics.clipFraction));
    series.entropy.push(num(s.metrics.entropy));
    series.gradNorm.push(num(s.metrics.gradNorm));
    series.tokensPerSecond.push(s.metrics.timeMs > 0 ? s.metrics.tokens / (s.metrics.timeMs / 1000) : null);
    const naive = num(s.naiveTokens);
    series.mergeRatio.push(naive !== null && s.metrics.tokens > 0 ? naive / s.metrics.tokens : null);
  }
  seriesCache.set(steps, series);
  return series;
}

/** Mean ± std as two bands; null where the spread is unknown. */
function rewardBand(series: StepSeries): { lower: (number | null)[]; upper: (number | null)[] } {
  return {
    lower: series.rewardMean.map((m, i) =>
      m === null || series.rewardStd[i] === null ? null : m - (series.rewardStd[i] as number),
    ),
    upper: series.rewardMean.map((m, i) =>
      m === null || series.rewardStd[i] === null ? null : m + (series.rewardStd[i] as number),
    ),
  };
}

function hasValues(values: readonly (number | null)[]): boolean {
  return values.some((v) => v !== null);
}

/** Steps that wrote a checkpoint, newest first. */
function checkpoints(steps: readonly TrainStepSummary[]): TrainStepSummary[] {
  const withCheckpoint: TrainStepSummary[] = [];
  for (let i = steps.length - 1; i >= 0; i--) if (steps[i].checkpoint) withCheckpoint.push(steps[i]);
  return withCheckpoint;
}

function lastStep(training: ModelTraining): number | undefined {
  return training.steps.length ? training.steps[training.steps.length - 1].step : undefined;
}

/**
 * What a change of a model's training state shows in the pushed status (every second): a step or policy version, an
 * engine state, an episode starting or ending (the pool's active count, the store's episode count). Equal keys
 * mean the loop's state fetched last is still current; the status carries no queue length of its own.
 */
function trainingChangeKey(status: StatusPayload | null, name: string | null): string {
  const model = status?.models.find((m) => m.name === name);
  if (!status || !model) return '';
  return `${name}|${model.step}|${model.policyVersion}|${model.engineState}|${model.pool.active}|${status.store.episodes}`;
}

export const modelsSelectors = { training, stepSeries, rewardBand, hasValues, checkpoints, lastStep, trainingChangeKey };
