/** The peer's status as the control API last reported it (fetched once, then pushed over the WebSocket). */
import type { StateCreator } from 'zustand';
import type { StatusPayload } from '../../../../swarm/common/api.ts';
import type { AppStore } from '../types.ts';

export interface SwarmState {
  status: StatusPayload | null;
  /** Epoch ms when `status` arrived; shows how fresh the numbers are while disconnected. */
  receivedAt: number | null;
}

export interface SwarmActions {
  statusReceived(status: StatusPayload, receivedAt: number): void;
}

export type SwarmSlice = { swarm: SwarmState } & SwarmActions;

export const initialSwarmState: SwarmState = { status: null, receivedAt: null };

export const createSwarmSlice: StateCreator<AppStore, [], [], SwarmSlice> = (set) => ({
  swarm: initialSwarmState,
  statusReceived: (status, receivedAt) => set({ swarm: { status, receivedAt } }),
});
