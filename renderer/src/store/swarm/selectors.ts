import type { ModelStatus, StatusPayload } from '../../../../swarm/common/api.ts';
import type { SwarmState } from './slice.ts';

const NO_MODELS: readonly ModelStatus[] = [];

function models(swarm: SwarmState): readonly ModelStatus[] {
  return swarm.status?.models ?? NO_MODELS;
}

/** Models whose engine is busy with an RL step or rollouts (anything but idle, loading or failed). */
function trainingModelCount(swarm: SwarmState): number {
  return models(swarm).filter((m) => m.engineState === 'rolling' || m.engineState === 'draining' || m.engineState === 'updating').length;
}

function failedModelCount(swarm: SwarmState): number {
  return models(swarm).filter((m) => m.engineState === 'failed').length;
}

export interface P2pSummary {
  state: 'disabled' | 'alone' | 'connected';
  label: string;
}

/** One line for the p2p card: disabled, on but alone, or connected to N peers. */
function p2pSummary(status: StatusPayload['p2p']): P2pSummary {
  if (!status.enabled) return { state: 'disabled', label: 'Not in a swarm' };
  if (status.peers === 0) return { state: 'alone', label: 'No peers yet' };
  return { state: 'connected', label: `${status.peers} ${status.peers === 1 ? 'peer' : 'peers'} connected` };
}

/** Pool usage as a fraction in [0, 1] (0 when the pool has no limit yet). */
function poolUsage(model: ModelStatus): number {
  return model.pool.limit > 0 ? Math.min(1, model.pool.active / model.pool.limit) : 0;
}

/**
 * When the swarm's peer list is worth fetching again, from pushed status alone: the swarm or its peer count
 * changed, this peer's models (policy versions, load) moved, or `everyMs` passed since the last status window
 * (remote peers' load and announcements reach no event, so they are read at the pace they are announced).
 */
function peersChangeKey(swarm: SwarmState, everyMs: number): string {
  const status = swarm.status;
  if (!status) return '';
  const local = status.models.map((m) => `${m.name}@${m.policyVersion}:${m.pool.active}`).join(',');
  const tick = swarm.receivedAt === null ? 0 : Math.floor(swarm.receivedAt / everyMs);
  return `${status.p2p.swarm}|${status.p2p.peers}|${local}|${tick}`;
}

export const swarmSelectors = { models, trainingModelCount, failedModelCount, p2pSummary, poolUsage, peersChangeKey };
