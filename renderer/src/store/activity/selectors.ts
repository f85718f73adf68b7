import type { ActivityState, LogEntry } from './slice.ts';

/** Newest first, at most `limit`. Builds a new array: call it inside useMemo keyed on `activity.logs`. */
function recentLogs(activity: ActivityState, limit: number): LogEntry[] {
  return activity.logs.slice(-limit).reverse();
}

function warningCount(activity: ActivityState): number {
  return activity.logs.filter((entry) => entry.level === 'warn' || entry.level === 'error').length;
}

/** The sequence number of the newest error line (-1 when none is held): a failure somewhere may have changed state. */
function lastErrorSeq(activity: ActivityState): number {
  for (let i = activity.logs.length - 1; i >= 0; i--) if (activity.logs[i].level === 'error') return activity.logs[i].seq;
  return -1;
}

export const activitySelectors = { recentLogs, warningCount, lastErrorSeq };
