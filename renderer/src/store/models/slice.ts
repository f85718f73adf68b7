/**
 * Models & training: the chosen model, its training loop's state (GET /api/models/:name/training) and its
 * optimizer steps (GET …/steps, then `train-step` events, and GET …/steps?after= for any an event did not bring),
 * kept as columns ready to plot. Steps are appended, never refetched: a long run's thousands of points arrive once.
 */
import type { StateCreator } from 'zustand';
import type { TrainStepSummary } from '../../../../swarm/common/api.ts';
import type { RunWarning } from '../../../../swarm/common/runs-api.ts';
import type { AppStore } from '../types.ts';

export type TrainingStatus = 'stopped' | 'running' | 'paused' | 'finished' | 'failed';

/** The training loop's state as GET /api/models/:name/training answers it (the fields the view shows). */
export interface TrainingLoopState {
  model: string;
  status: TrainingStatus;
  step: number;
  policyVersion: number;
  engineState: string;
  queuedEpisodes: number;
  completeGroups: number;
  lastError: string | null;
  /** The run the loop trains (runs-api.ts); null before its first batch. Absent on peers before runs were recorded. */
  runId?: string | null;
  /** Why the loop's batches are thin (mostly discarded groups, checkpoints failing). */
  warnings?: RunWarning[];
  config: {
    batchTasks: number;
    groupSize: number;
    checkpointEvery: number;
    maxSteps: number;
    mergeMode?: string;
  } & Record<string, unknown>;
}

/** The most steps kept per model: years of a step a minute would be more than a plot needs. */
export const MAX_STEPS_KEPT = 200_000;

export interface ModelTraining {
  state: TrainingLoopState | null;
  /** Why the training state is unknown (e.g. this peer runs no training loop for the model). */
  stateError: string | null;
  steps: readonly TrainStepSummary[];
  /** Bumps whenever steps change, so charts redraw without comparing arrays. */
  stepsVersion: number;
  /** Whether the stored history has been fetched: until then a pushed step would sit alone without its past. */
  stepsLoaded: boolean;
  /** The step of the last `train-step` event, appended or not: a step ended, so the loop's state may have changed. */
  lastPushedStep: number | null;
  busy: boolean;
}

export interface ModelsState {
  selected: string | null;
  byModel: Readonly<Record<string, ModelTraining>>;
}

export interface ModelsActions {
  modelSelected(name: string): void;
  trainingStateLoaded(name: string, state: TrainingLoopState | null, error: string | null): void;
  trainingBusy(name: string, busy: boolean): void;
  /** Steps fetched (GET …/steps?after=); steps already held are ignored. */
  trainStepsReceived(name: string, steps: readonly TrainStepSummary[]): void;
  /**
   * A `train-step` event: appended only when it is the step right after the last one held, once the history is
   * loaded. Otherwise (a gap: events missed while disconnected) it is left to the next fetch, which brings the
   * missing steps with it; appending it would leave the gap for good, as fetches ask only for later steps.
   */
  trainStepPushed(step: TrainStepSummary): void;
}

export type ModelsSlice = { models: ModelsState } & ModelsActions;

export const emptyTraining: ModelTraining = {
  state: null,
  stateError: null,
  steps: [],
  stepsVersion: 0,
  stepsLoaded: false,
  lastPushedStep: null,
  busy: false,
};

export const initialModelsState: ModelsState = { selected: null, byModel: {} };

export const createModelsSlice: StateCreator<AppStore, [], [], ModelsSlice> = (set) => {
  const updateModel = (name: string, fn: (m: ModelTraining) => ModelTraining | null) =>
    set((store) => {
      const current = store.models.byModel[name] ?? emptyTraining;
      const next = fn(current);
      return next
        ? { models: { ...store.models, byModel: { ...store.models.byModel, [name]: next } } }
        : store;
    });
  return {
    models: initialModelsState,
    modelSelected: (name) => set((s) => ({ models: { ...s.models, selected: name } })),
    trainingStateLoaded: (name, state, error) =>
      updateModel(name, (m) => ({ ...m, state, stateError: error })),
    trainingBusy: (name, busy) => updateModel(name, (m) => ({ ...m, busy })),
    trainStepsReceived: (name, steps) => updateModel(name, (m) => withSteps({ ...m, stepsLoaded: true }, steps) ?? (m.stepsLoaded ? null : { ...m, stepsLoaded: true })),
    trainStepPushed: (step) =>
      updateModel(step.model, (m) => {
        const last = m.steps.length ? m.steps[m.steps.length - 1].step : 0;
        const seen = { ...m, lastPushedStep: step.step };
        return (m.stepsLoaded && step.step === last + 1 && withSteps(seen, [step])) || seen;
      }),
  };
};

/** `m` with the steps after its last one appended in order; null when there are none. */
function withSteps(m: ModelTraining, steps: readonly TrainStepSummary[]): ModelTraining | null {
  const lastStep = m.steps.length ? m.steps[m.steps.length - 1].step : -Infinity;
  const fresh = steps.filter((s) => s.step > lastStep).sort((a, b) => a.step - b.step);
  if (fresh.length === 0) return null;
  const all = [...m.steps, ...fresh];
  return { ...m, steps: all.length > MAX_STEPS_KEPT ? all.slice(-MAX_STEPS_KEPT) : all, stepsVersion: m.stepsVersion + 1 };
}
