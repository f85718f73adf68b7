import type { StatusPayload, TrainStepSummary } from '../../../../swarm/common/api.ts';
import { emptyTraining, type ModelsState, type ModelTraining, type TrainingLoopState } from './slice.ts';

function training(models: ModelsState, name: string | null): ModelTraining {
  return (name && models.byModel[name]) || emptyTraining;
}

/** Steps that wrote a checkpoint, newest first. */
function checkpoints(steps: readonly TrainStepSummary[]): TrainStepSummary[] {
  const withCheckpoint: TrainStepSummary[] = [];
  for (let i = steps.length - 1; i >= 0; i--) if (steps[i].checkpoint) withCheckpoint.push(steps[i]);
  return withCheckpoint;
}

function lastStep(training: ModelTraining): number | undefined {
  return training.steps.length ? training.steps[training.steps.length - 1].step : undefined;
}

/**
 * What a change of a model's training state shows in the pushed status (every second): a step or policy version, an
 * engine state, an episode starting or ending (the pool's active count, the store's episode count). Equal keys
 * mean the loop's state fetched last is still current; the status carries no queue length of its own.
 */
function trainingChangeKey(status: StatusPayload | null, name: string | null): string {
  const model = status?.models.find((m) => m.name === name);
  if (!status || !model) return '';
  return `${name}|${model.step}|${model.policyVersion}|${model.engineState}|${model.pool.active}|${status.store.episodes}`;
}

/**
 * Whether Start is the next sensible action (so it is the primary button): the loop is known and not running, and
 * has not reached its maxSteps (starting a finished loop again is possible, but not what one usually wants next).
 */
function startIsNext(state: TrainingLoopState | null): boolean {
  return state !== null && (state.status === 'stopped' || state.status === 'paused' || state.status === 'failed');
}

/** The line under an empty checkpoint table. */
function noCheckpointLine(state: TrainingLoopState | null): string {
  if (!state) return 'No checkpoint yet.';
  const every = state.config.checkpointEvery;
  return every > 0 ? `No checkpoint yet (one every ${every} steps).` : 'Checkpoints are off (checkpointEvery 0).';
}

export const modelsSelectors = { training, checkpoints, lastStep, trainingChangeKey, startIsNext, noCheckpointLine };
