/**
 * How the UI is connected to its peer, shown honestly in the top bar:
 * connecting → live; on loss, disconnected with the time of the next retry; unauthorised stops retrying.
 */
import type { StateCreator } from 'zustand';
import type { AppStore } from '../types.ts';

export type ConnectionPhase = 'connecting' | 'live' | 'disconnected' | 'unauthorised';

export interface ConnectionState {
  phase: ConnectionPhase;
  /** Failed attempts since the last live connection. */
  failedAttempts: number;
  /** Epoch ms of the next reconnect attempt, while disconnected. */
  retryAt: number | null;
  /** Why the last attempt failed (shown to the user). */
  lastError: string | null;
}

export interface ConnectionActions {
  connectionStarted(): void;
  connectionLive(): void;
  connectionLost(reason: string, retryAt: number): void;
  connectionUnauthorised(reason: string): void;
}

export type ConnectionSlice = { connection: ConnectionState } & ConnectionActions;

export const initialConnectionState: ConnectionState = { phase: 'connecting', failedAttempts: 0, retryAt: null, lastError: null };

export const createConnectionSlice: StateCreator<AppStore, [], [], ConnectionSlice> = (set) => ({
  connection: initialConnectionState,
  connectionStarted: () => set((s) => ({ connection: { ...s.connection, phase: 'connecting', retryAt: null } })),
  connectionLive: () => set({ connection: { phase: 'live', failedAttempts: 0, retryAt: null, lastError: null } }),
  connectionLost: (reason, retryAt) =>
    set((s) => ({ connection: { phase: 'disconnected', failedAttempts: s.connection.failedAttempts + 1, retryAt, lastError: reason } })),
  connectionUnauthorised: (reason) =>
    set((s) => ({ connection: { ...s.connection, phase: 'unauthorised', retryAt: null, lastError: reason } })),
});
