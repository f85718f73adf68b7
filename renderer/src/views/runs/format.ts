/** Display helpers of the Runs views. */
import type { RunStart, RunStatus } from '../../../../swarm/common/runs-api.ts';
import { formatDuration } from '../../format.ts';

export function formatPercent(share: number | null | undefined): string {
  return share === null || share === undefined ? '—' : `${(share * 100).toFixed(0)}%`;
}

export function formatDurationOrDash(seconds: number | null): string {
  return seconds === null ? '—' : formatDuration(seconds);
}

/** Where the run's weights started, in one line. */
export function formatStart(start: RunStart): string {
  if (start.kind === 'source') return `fresh from ${start.source}`;
  const at = start.checkpointStep === null ? 'its latest weights' : `its checkpoint of step ${start.checkpointStep}`;
  return `continues ${start.parentId} (${at})`;
}

/** The pill colour of a run status, in the shell's `data-state` vocabulary (the word is always shown too). */
export function statusTone(status: RunStatus): string {
  switch (status) {
    case 'running':
      return 'rolling';
    case 'paused':
      return 'draining';
    case 'failed':
    case 'crashed':
      return 'failed';
    case 'finished':
      return 'updating';
    case 'stopped':
      return 'idle';
  }
}
