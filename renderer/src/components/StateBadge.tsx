import type { ModelStatus } from '../../../swarm/common/api.ts';

const ENGINE_STATE_LABELS: Record<ModelStatus['engineState'], string> = {
  loading: 'Loading',
  idle: 'Idle',
  rolling: 'Rolling out',
  draining: 'Draining',
  updating: 'Updating',
  failed: 'Failed',
};

/** A model's engine state as a coloured pill (the colour is not the only cue: the word is always there). */
export function EngineStateBadge({ state, error }: { state: ModelStatus['engineState']; error?: string }) {
  return (
    <span className="pill" data-state={state} title={error}>
      {ENGINE_STATE_LABELS[state]}
    </span>
  );
}
