import type { ActivityState, LogEntry } from './slice.ts';

/** Newest first, at most `limit`. Builds a new array: call it inside useMemo keyed on `activity.logs`. */
function recentLogs(activity: ActivityState, limit: number): LogEntry[] {
  return activity.logs.slice(-limit).reverse();
}

function warningCount(activity: ActivityState): number {
  return activity.logs.filter((entry) => entry.level === 'warn' || entry.level === 'error').length;
}

export const activitySelectors = { recentLogs, warningCount };
