/**
 * Messages between the caller (worker/node/engine-client.ts) and the engine thread (worker/node/engine-thread.ts).
 * Every request carries an id; the thread answers with exactly one `result` or `error` for it, plus `token` events
 * for a streaming generate. `cancel` is fire-and-forget.
 */
import type {
  BackendName,
  GeneratedToken,
  GenerateRequest,
  LoraConfig,
  ModelSource,
  NamedTensors,
  OptimizerState,
  TrainOptions,
  TrainPrecision,
  TrainSample,
} from './engine.ts';

/** How to start an engine: which model, optional LoRA, backend override, seed and training precision. */
export interface EngineOptions {
  source: ModelSource;
  /** Train LoRA adapters on a frozen base instead of the full model. */
  lora?: LoraConfig;
  /** A PEFT adapter folder to start from (its adapter_config.json gives the LoRA config unless `lora` is set). */
  adapterPath?: string;
  backend?: BackendName;
  /** Seeds LoRA init and everything else random in the engine (the builtin base weights have their own seed). */
  seed?: number;
  /** 'mixed': mixed-precision training where the device allows (EngineInit.precision); default 'f32'. */
  precision?: TrainPrecision;
}

export type EngineRequest =
  | { id: number; type: 'init'; options: EngineOptions }
  | { id: number; type: 'generate'; req: GenerateRequest; stream: boolean }
  | { id: number; type: 'cancel'; target: number }
  | { id: number; type: 'trainStep'; samples: TrainSample[]; options: Partial<TrainOptions> }
  | { id: number; type: 'logprobs'; sequences: number[][] }
  | { id: number; type: 'snapshotReference' }
  | { id: number; type: 'getWeights' }
  | { id: number; type: 'setWeights'; weights: NamedTensors; policyVersion: number }
  | { id: number; type: 'getOptimizerState' }
  | { id: number; type: 'setOptimizerState'; state: OptimizerState }
  | { id: number; type: 'save'; dir: string }
  | { id: number; type: 'close' }
  /** Test hook: the thread dies with an uncaught exception, as a real crash would. */
  | { id: number; type: 'crash' };

/** The engine thread died (uncaught exception or exit): every pending and later call fails with this. */
export class EngineCrashedError extends Error {
  override name = 'EngineCrashedError';
}

/** A call on an engine that has been closed. */
export class EngineClosedError extends Error {
  override name = 'EngineClosedError';
}

export interface FlatError {
  name: string;
  message: string;
  [field: string]: unknown;
}

export type EngineResponse =
  | { id: number; type: 'result'; value: unknown }
  | { id: number; type: 'error'; error: FlatError }
  | { id: number; type: 'token'; token: GeneratedToken };

/** Flatten an error for the boundary: name, message and its own enumerable fields. */
export function flattenError(err: unknown): FlatError {
  if (err instanceof Error) {
    const extra: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(err)) if (k !== 'stack' && (typeof v !== 'object' || v === null || Array.isArray(v))) extra[k] = v;
    return { ...extra, name: err.name, message: err.message };
  }
  return { name: 'Error', message: String(err) };
}

/** Rebuild an error on this side with the same name (and fields). */
export function rebuildError(flat: FlatError): Error {
  const err = new Error(flat.message);
  Object.assign(err, flat);
  err.name = flat.name;
  return err;
}

/** The distinct ArrayBuffers under named tensors, for a transfer list. */
export function tensorBuffers(tensors: NamedTensors): ArrayBuffer[] {
  const set = new Set<ArrayBuffer>();
  for (const t of Object.values(tensors)) set.add(t.data.buffer as ArrayBuffer);
  return [...set];
}
