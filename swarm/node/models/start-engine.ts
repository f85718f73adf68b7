/**
 * The default way to start a hosted model's engine: its own worker thread (worker/node/engine-client.ts).
 * Imported lazily, so that commands which host no model (`agentjet status`) never load tfjs.
 */
import type { ModelSource, TrainerEngine } from '../../../worker/common/engine.ts';

export async function startWorkerEngine(source: ModelSource): Promise<TrainerEngine> {
  const { startEngine } = await import('../../../worker/node/engine-client.ts');
  return startEngine({ source });
}
