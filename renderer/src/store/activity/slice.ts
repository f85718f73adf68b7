/** The peer's recent log lines, pushed over the WebSocket; bounded so a chatty peer cannot grow the UI's memory. */
import type { StateCreator } from 'zustand';
import type { ServerEvent } from '../../../../swarm/common/api.ts';
import type { AppStore } from '../types.ts';

export type LogEntry = Extract<ServerEvent, { type: 'log' }>['data'] & { seq: number };

/** Enough to see what just happened; older lines stay in the peer's own log. */
export const MAX_LOG_ENTRIES = 200;

export interface ActivityState {
  logs: readonly LogEntry[];
  nextSeq: number;
}

export interface ActivityActions {
  logReceived(entry: Omit<LogEntry, 'seq'>): void;
}

export type ActivitySlice = { activity: ActivityState } & ActivityActions;

export const initialActivityState: ActivityState = { logs: [], nextSeq: 0 };

export const createActivitySlice: StateCreator<AppStore, [], [], ActivitySlice> = (set) => ({
  activity: initialActivityState,
  logReceived: (entry) =>
    set((s) => {
      const logs = [...s.activity.logs, { ...entry, seq: s.activity.nextSeq }];
      return { activity: { logs: logs.length > MAX_LOG_ENTRIES ? logs.slice(-MAX_LOG_ENTRIES) : logs, nextSeq: s.activity.nextSeq + 1 } };
    }),
});
