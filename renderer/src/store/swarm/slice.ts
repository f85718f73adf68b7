/**
 * The peer's status as the control API last reported it (fetched once, then pushed over the WebSocket), the
 * swarm's peers (GET /api/peers, fetched again as status events arrive while the Swarm view is open and the peer is
 * in a swarm), and this peer's membership (GET /api/swarm; create / join / leave).
 */
import type { StateCreator } from 'zustand';
import type { PeersResponse, StatusPayload, SwarmMembership } from '../../../../swarm/common/api.ts';
import type { AppStore } from '../types.ts';

export interface SwarmState {
  status: StatusPayload | null;
  /** Epoch ms when `status` arrived; shows how fresh the numbers are while disconnected. */
  receivedAt: number | null;
  peers: PeersResponse | null;
  peersError: string | null;
  membership: SwarmMembership | null;
  /** The change under way; the forms are disabled meanwhile. */
  membershipPending: MembershipChange | null;
  /** The last failed change or load, by the server's error name (e.g. InvalidSwarmTokenError). */
  membershipError: { name: string; message: string } | null;
}

export type MembershipChange = 'load' | 'create' | 'join' | 'leave';

export interface SwarmActions {
  statusReceived(status: StatusPayload, receivedAt: number): void;
  peersLoaded(peers: PeersResponse): void;
  peersFailed(message: string): void;
  membershipRequested(change: MembershipChange): void;
  membershipLoaded(membership: SwarmMembership): void;
  membershipFailed(error: { name: string; message: string }): void;
}

export type SwarmSlice = { swarm: SwarmState } & SwarmActions;

export const initialSwarmState: SwarmState = {
  status: null,
  receivedAt: null,
  peers: null,
  peersError: null,
  membership: null,
  membershipPending: null,
  membershipError: null,
};

export const createSwarmSlice: StateCreator<AppStore, [], [], SwarmSlice> = (set) => ({
  swarm: initialSwarmState,
  statusReceived: (status, receivedAt) => set((s) => ({ swarm: { ...s.swarm, status, receivedAt } })),
  peersLoaded: (peers) => set((s) => ({ swarm: { ...s.swarm, peers, peersError: null } })),
  // The last list stays on screen: a failed refresh says so without emptying the table.
  peersFailed: (message) => set((s) => ({ swarm: { ...s.swarm, peersError: message } })),
  membershipRequested: (change) => set((s) => ({ swarm: { ...s.swarm, membershipPending: change, membershipError: null } })),
  // Another swarm's (or no swarm's) peer list must not linger after a change of membership.
  membershipLoaded: (membership) =>
    set((s) => ({
      swarm: {
        ...s.swarm,
        membership,
        membershipPending: null,
        membershipError: null,
        peers: membership.joined && s.swarm.peers?.swarm === membership.swarm ? s.swarm.peers : null,
        peersError: null,
      },
    })),
  membershipFailed: (error) => set((s) => ({ swarm: { ...s.swarm, membershipPending: null, membershipError: error } })),
});
