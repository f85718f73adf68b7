/**
 * A run's steps as CSV or JSONL, one line per step, produced lazily so that a run of any length streams (the
 * control API's downloads and `agentjet runs export` write the same text).
 */
import type { RunStep } from '../../common/api.ts';

/** The CSV's columns, in order: where each sits in a step, and its header. */
const CSV_COLUMNS: ReadonlyArray<[string, (s: RunStep) => unknown]> = [
  ['step', (s) => s.runStep],
  ['model_step', (s) => s.step],
  ['policy_version', (s) => s.policyVersion],
  ['time', (s) => s.time],
  ['reward_mean', (s) => s.rewardMean],
  ['reward_std', (s) => s.rewardStd],
  ['success_rate', (s) => s.successRate],
  ['loss', (s) => s.metrics.loss],
  ['kl', (s) => s.metrics.kl],
  ['clip_fraction', (s) => s.metrics.clipFraction],
  ['entropy', (s) => s.metrics.entropy],
  ['grad_norm', (s) => s.metrics.gradNorm],
  ['tokens', (s) => s.metrics.tokens],
  ['trained_tokens', (s) => s.metrics.trainedTokens],
  ['update_ms', (s) => s.metrics.timeMs],
  ['groups', (s) => s.groups],
  ['episodes', (s) => s.episodes],
  ['samples', (s) => s.samples],
  ['naive_tokens', (s) => s.naiveTokens],
  ['computed_tokens', (s) => s.metrics.computedTokens],
  ['packing', (s) => s.metrics.packing],
  ['discarded_groups', (s) => s.discardedGroups],
  ['discarded_share', (s) => s.discardedShare],
  ['response_tokens_mean', (s) => s.responseTokensMean],
  ['policy_lag_mean', (s) => s.policyLagMean],
  ['policy_lag_max', (s) => s.policyLagMax],
  ['dropped_stale', (s) => s.droppedStale],
  ['rollout_ms', (s) => s.phases?.rolloutMs],
  ['drain_ms', (s) => s.phases?.drainMs],
  ['step_ms', (s) => s.phases?.updateMs],
  ['rollout_tokens_per_s', (s) => s.rolloutTokensPerS],
  ['sampler_busy_share', (s) => s.samplerBusyShare],
  ['checkpoint', (s) => s.checkpoint],
  ['reverted_at', (s) => s.revertedAt],
];

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled; absent values are empty. */
function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function* stepsCsv(steps: Iterable<RunStep>): Generator<string> {
  yield `${CSV_COLUMNS.map(([name]) => name).join(',')}\n`;
  for (const step of steps) yield `${CSV_COLUMNS.map(([, get]) => csvField(get(step))).join(',')}\n`;
}

export function* stepsJsonl(steps: Iterable<RunStep>): Generator<string> {
  for (const step of steps) yield `${JSON.stringify(step)}\n`;
}

export const STEP_EXPORT_FORMATS = ['csv', 'jsonl'] as const;
export type StepExportFormat = (typeof STEP_EXPORT_FORMATS)[number];
