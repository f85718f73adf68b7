/** Display helpers of the Research view. */
import type { DecisionOutcome } from '../../../../swarm/common/research/decision.ts';
import type { StudyRunStatus, StudyStatus, StudySummary } from '../../../../swarm/common/research-api.ts';

/** The pill colour of a study status, in the shell's `data-state` vocabulary (the word is always shown too). */
export function studyStatusTone(status: StudyStatus | StudyRunStatus): string {
  switch (status) {
    case 'running':
      return 'rolling';
    case 'planning':
    case 'pending':
      return 'loading';
    case 'stopping':
      return 'draining';
    case 'failed':
      return 'failed';
    case 'done':
      return 'updating';
    case 'stopped':
      return 'idle';
  }
}

export function decisionTone(outcome: DecisionOutcome): string {
  switch (outcome) {
    case 'met':
      return 'rolling';
    case 'not-met':
      return 'failed';
    case 'inconclusive':
      return 'draining';
  }
}

/** `k/n`: the study's current stage, counted from 1 (the API counts stages from 0). */
export function formatStage(study: Pick<StudySummary, 'stage' | 'stages'>): string {
  return `${study.stage + 1}/${study.stages}`;
}

/** `done/total`, with the failed ones after it when any. */
export function formatRunsDone(runs: StudySummary['runs']): string {
  const failed = runs.failed > 0 ? ` (${runs.failed} failed)` : '';
  return `${runs.done}/${runs.total}${failed}`;
}

/** A metric value: 3 significant digits, '—' for none. */
export function formatMetric(value: number | null | undefined): string {
  return value === null || value === undefined || !Number.isFinite(value)
    ? '—'
    : String(Number(value.toPrecision(3)));
}

/** `[low, high]`, '—' where the interval could not be estimated. */
export function formatInterval(low: number | null, high: number | null): string {
  return low === null || high === null ? '—' : `[${formatMetric(low)}, ${formatMetric(high)}]`;
}

/** An arm's knob values in one line (`lr=0.001, klCoef=0`), '' for an arm listed by name. */
export function formatParams(params: Record<string, number | string | boolean>): string {
  return Object.entries(params)
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(', ');
}
