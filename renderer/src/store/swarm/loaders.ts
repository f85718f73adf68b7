/** Control-API calls of the Swarm view; answers go to the swarm slice. */
import type { StoreApi } from 'zustand';
import type { CreateSwarmRequest, PeersResponse, SwarmMembership } from '../../../../swarm/common/api.ts';
import type { ApiRequest } from '../../api/client.ts';
import { describeError } from '../../api/errors.ts';
import type { AppStore } from '../types.ts';
import type { MembershipChange } from './slice.ts';

export async function loadPeers(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  try {
    store.getState().peersLoaded(await request<PeersResponse>('GET', '/peers'));
  } catch (error) {
    store.getState().peersFailed(describeError(error));
  }
}

export function loadMembership(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  return changeMembership(store, 'load', () => request<SwarmMembership>('GET', '/swarm'));
}

/** A new private swarm; the answer carries the join token to give the other machines. */
export function createSwarm(store: StoreApi<AppStore>, request: ApiRequest, body: CreateSwarmRequest): Promise<void> {
  return changeMembership(store, 'create', () => request<SwarmMembership>('POST', '/swarm/create', body));
}

export function joinSwarm(store: StoreApi<AppStore>, request: ApiRequest, token: string): Promise<void> {
  return changeMembership(store, 'join', () => request<SwarmMembership>('POST', '/swarm/join', { token }));
}

export function leaveSwarm(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  return changeMembership(store, 'leave', () => request<SwarmMembership>('POST', '/swarm/leave', {}));
}

async function changeMembership(
  store: StoreApi<AppStore>,
  change: MembershipChange,
  send: () => Promise<SwarmMembership>,
): Promise<void> {
  store.getState().membershipRequested(change);
  try {
    store.getState().membershipLoaded(await send());
  } catch (error) {
    const name = error instanceof Error ? error.name : 'Error';
    store.getState().membershipFailed({ name, message: error instanceof Error ? error.message : String(error) });
  }
}
