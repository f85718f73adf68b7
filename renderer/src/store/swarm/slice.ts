/**
 * The peer's status as the control API last reported it (fetched once, then pushed over the WebSocket), and the
 * swarm's peers (GET /api/peers, polled while the Swarm view is open and the peer is in a swarm).
 */
import type { StateCreator } from 'zustand';
import type { PeersResponse, StatusPayload } from '../../../../swarm/common/api.ts';
import type { AppStore } from '../types.ts';

export interface SwarmState {
  status: StatusPayload | null;
  /** Epoch ms when `status` arrived; shows how fresh the numbers are while disconnected. */
  receivedAt: number | null;
  peers: PeersResponse | null;
  peersError: string | null;
}

export interface SwarmActions {
  statusReceived(status: StatusPayload, receivedAt: number): void;
  peersLoaded(peers: PeersResponse): void;
  peersFailed(message: string): void;
}

export type SwarmSlice = { swarm: SwarmState } & SwarmActions;

export const initialSwarmState: SwarmState = { status: null, receivedAt: null, peers: null, peersError: null };

export const createSwarmSlice: StateCreator<AppStore, [], [], SwarmSlice> = (set) => ({
  swarm: initialSwarmState,
  statusReceived: (status, receivedAt) => set((s) => ({ swarm: { ...s.swarm, status, receivedAt } })),
  peersLoaded: (peers) => set((s) => ({ swarm: { ...s.swarm, peers, peersError: null } })),
  // The last list stays on screen: a failed poll says so without emptying the table.
  peersFailed: (message) => set((s) => ({ swarm: { ...s.swarm, peersError: message } })),
});
