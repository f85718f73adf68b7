/** Control-API calls of the Swarm view; answers go to the swarm slice. */
import type { StoreApi } from 'zustand';
import type { PeersResponse } from '../../../../swarm/common/api.ts';
import { describeError, type DataRequest } from '../episodes/request.ts';
import type { AppStore } from '../types.ts';

export async function loadPeers(store: StoreApi<AppStore>, request: DataRequest): Promise<void> {
  try {
    store.getState().peersLoaded(await request<PeersResponse>('GET', '/peers'));
  } catch (error) {
    store.getState().peersFailed(describeError(error));
  }
}
