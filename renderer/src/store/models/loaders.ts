/** Control-API calls of the Models view. */
import type { StoreApi } from 'zustand';
import type { TrainStepSummary } from '../../../../swarm/common/api.ts';
import { queryString, type ApiRequest } from '../../api/client.ts';
import { ControlApiError, describeError } from '../../api/errors.ts';
import type { AppStore } from '../types.ts';
import { modelsSelectors } from './selectors.ts';
import type { TrainingLoopState } from './slice.ts';

const enc = encodeURIComponent;
/** Steps per request: the API's maximum, so a long history loads in a few round trips. */
const STEPS_PER_REQUEST = 10_000;

export async function loadTraining(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  name: string,
): Promise<void> {
  try {
    store
      .getState()
      .trainingStateLoaded(
        name,
        await request<TrainingLoopState>('GET', `/models/${enc(name)}/training`),
        null,
      );
  } catch (error) {
    const missing = error instanceof ControlApiError && error.status === 404;
    store
      .getState()
      .trainingStateLoaded(
        name,
        null,
        missing ? 'This peer runs no training loop for this model.' : describeError(error),
      );
  }
}

/** Fetches the steps after the last one held, page by page. */
export async function loadSteps(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  name: string,
): Promise<void> {
  for (;;) {
    const after = modelsSelectors.lastStep(modelsSelectors.training(store.getState().models, name));
    let steps: TrainStepSummary[];
    try {
      ({ steps } = await request<{ steps: TrainStepSummary[] }>(
        'GET',
        `/models/${enc(name)}/steps${queryString({ after, limit: STEPS_PER_REQUEST })}`,
      ));
    } catch {
      return; // the training state already says why (no loop for this model); steps simply stay empty
    }
    store.getState().trainStepsReceived(name, steps);
    if (steps.length < STEPS_PER_REQUEST) return;
  }
}

export async function trainingAction(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  name: string,
  action: 'start' | 'pause' | 'stop',
): Promise<void> {
  store.getState().trainingBusy(name, true);
  try {
    store
      .getState()
      .trainingStateLoaded(
        name,
        await request<TrainingLoopState>('POST', `/models/${enc(name)}/training`, { action }),
        null,
      );
  } catch (error) {
    store
      .getState()
      .trainingStateLoaded(
        name,
        modelsSelectors.training(store.getState().models, name).state,
        describeError(error),
      );
  } finally {
    store.getState().trainingBusy(name, false);
  }
}
