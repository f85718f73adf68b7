/** Control-API calls of the Clients view; answers go to the clients slice. */
import type { StoreApi } from 'zustand';
import type { ClientRunRecord, ClientStatus } from '../../../../swarm/common/runner-api.ts';
import type { ApiRequest } from '../../api/client.ts';
import { describeError } from '../../api/errors.ts';
import type { AppStore } from '../types.ts';
import { clientsSelectors } from './selectors.ts';

const enc = encodeURIComponent;

export async function loadClients(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  try {
    const { clients } = await request<{ clients: ClientStatus[] }>('GET', '/clients');
    store.getState().clientsLoaded(clients, Date.now());
  } catch (error) {
    store.getState().clientsFailed(describeError(error));
  }
}

/** How many runs the view shows: enough to see a pattern of failures. */
const RUNS_SHOWN = 50;

export async function loadRuns(store: StoreApi<AppStore>, request: ApiRequest, name: string): Promise<void> {
  try {
    const { runs } = await request<{ runs: ClientRunRecord[] }>(
      'GET',
      `/clients/${enc(name)}/runs?limit=${RUNS_SHOWN}`,
    );
    store.getState().clientRunsLoaded(name, runs);
  } catch (error) {
    store.getState().clientRunsFailed(name, describeError(error));
  }
}

export async function attachDraft(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  const state = store.getState();
  let body;
  try {
    body = clientsSelectors.attachRequest(state.clients.draft);
  } catch (error) {
    state.attachFailed(describeError(error));
    return;
  }
  state.attachStarted();
  try {
    const status = await request<ClientStatus>('POST', '/clients', body);
    store.getState().attachFinished(status, Date.now());
    void loadRuns(store, request, status.name);
  } catch (error) {
    store.getState().attachFailed(describeError(error));
  }
}

export async function clientAction(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  name: string,
  action: 'pause' | 'resume' | 'detach',
): Promise<void> {
  try {
    if (action === 'detach') {
      await request('DELETE', `/clients/${enc(name)}`);
      store.getState().clientRemoved(name);
    } else {
      store
        .getState()
        .clientUpdated(await request<ClientStatus>('POST', `/clients/${enc(name)}/${action}`), Date.now());
    }
  } catch (error) {
    store.getState().clientsFailed(describeError(error));
  }
}
