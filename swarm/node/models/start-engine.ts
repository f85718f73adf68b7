/**
 * The default way to start a hosted model's engine: its own worker thread (worker/node/engine-client.ts).
 * Imported lazily, so that commands which host no model (`agentjet status`) never load tfjs.
 */
import type { ModelSource, TrainerEngine } from '../../../worker/common/engine.ts';
import type { EngineStartOptions } from './model-host.ts';

export async function startWorkerEngine(source: ModelSource, options: EngineStartOptions = {}): Promise<TrainerEngine> {
  const { startEngine } = await import('../../../worker/node/engine-client.ts');
  return startEngine({
    source,
    ...(options.lora ? { lora: options.lora } : {}),
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    ...(options.backend ? { backend: options.backend } : {}),
  });
}
