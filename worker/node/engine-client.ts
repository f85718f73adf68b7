/**
 * The caller's side of the engine thread: `startEngine` spawns a worker_threads Worker running
 * worker/node/engine-thread.ts and returns a TrainerEngine whose calls become typed messages.
 *
 * Failure model: an error inside the engine comes back as `{ name, message }` and is rethrown here with that name.
 * If the thread dies (uncaught exception, exit), every pending call — and every later one — rejects with
 * EngineCrashedError, so a caller never hangs.
 */
import { Worker } from 'node:worker_threads';
import type { GeneratedToken, GenerateRequest, GenerateResult, ModelInfo, NamedTensors, OptimizerState, TrainerEngine, TrainMetrics, TrainOptions, TrainSample } from '../common/engine.ts';
import { EngineClosedError, EngineCrashedError, type EngineOptions, type EngineRequest, type EngineResponse, rebuildError } from '../common/protocol.ts';

// The in-process variant, `createEngine`, lives in ./load-model.ts: importing it loads tfjs, which this module keeps
// off the caller's thread.
export { EngineClosedError, EngineCrashedError, type EngineOptions } from '../common/protocol.ts';

/** Distributive Omit over the request union (each request without its id). */
type RequestBody = EngineRequest extends infer R ? (R extends EngineRequest ? Omit<R, 'id'> : never) : never;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  onToken?: (token: GeneratedToken) => void;
}

export interface ThreadEngine extends TrainerEngine {
  /** The worker thread's id (diagnostics). */
  readonly threadId: number;
  /** Test hook: make the engine thread die as a crash would. */
  crashForTest(): void;
}

class EngineThreadClient implements ThreadEngine {
  info!: ModelInfo;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private failure: Error | null = null;
  private closing = false;

  constructor(private readonly worker: Worker) {
    worker.on('message', (msg: EngineResponse) => this.onMessage(msg));
    worker.on('error', (err) => this.fail(new EngineCrashedError(`engine thread crashed: ${err.message}`)));
    worker.on('exit', (code) => this.fail(this.closing ? new EngineClosedError('the engine was closed') : new EngineCrashedError(`engine thread exited unexpectedly (code ${code})`)));
  }

  get threadId(): number {
    return this.worker.threadId;
  }

  private onMessage(msg: EngineResponse): void {
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.type === 'token') {
      try {
        p.onToken?.(msg.token);
      } catch (err) {
        // The caller's callback failed: its call fails with that error (not as an uncaught exception of this
        // thread), and the engine stops generating for it.
        this.pending.delete(msg.id);
        p.reject(err instanceof Error ? err : new Error(String(err)));
        if (!this.failure) this.worker.postMessage({ id: this.nextId++, type: 'cancel', target: msg.id } satisfies EngineRequest);
      }
      return;
    }
    this.pending.delete(msg.id);
    if (msg.type === 'result') p.resolve(msg.value);
    else p.reject(rebuildError(msg.error));
  }

  /** Reject everything pending, and every later call. */
  private fail(err: Error): void {
    this.failure ??= err;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
  }

  call<T>(body: RequestBody, onToken?: (token: GeneratedToken) => void, transfer: ArrayBuffer[] = []): { id: number; result: Promise<T> } {
    const id = this.nextId++;
    if (this.failure) return { id, result: Promise.reject(this.failure) };
    const result = new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, onToken });
    });
    this.worker.postMessage({ ...body, id } as EngineRequest, transfer);
    return { id, result };
  }

  async init(options: EngineOptions): Promise<void> {
    this.info = await this.call<ModelInfo>({ type: 'init', options }).result;
  }

  async generate(req: GenerateRequest, onToken?: (token: GeneratedToken) => void, signal?: AbortSignal): Promise<GenerateResult> {
    const { id, result } = this.call<GenerateResult>({ type: 'generate', req, stream: onToken !== undefined }, onToken);
    const cancel = () => {
      if (!this.failure) this.worker.postMessage({ id: this.nextId++, type: 'cancel', target: id } satisfies EngineRequest);
    };
    if (signal?.aborted) cancel();
    signal?.addEventListener('abort', cancel, { once: true });
    try {
      return await result;
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  }

  async trainStep(samples: TrainSample[], options: Partial<TrainOptions> = {}): Promise<TrainMetrics> {
    const metrics = await this.call<TrainMetrics>({ type: 'trainStep', samples, options }).result;
    this.info.policyVersion = metrics.policyVersion;
    return metrics;
  }

  logprobs(sequences: number[][]): Promise<number[][]> {
    return this.call<number[][]>({ type: 'logprobs', sequences }).result;
  }

  snapshotReference(): Promise<void> {
    return this.call<void>({ type: 'snapshotReference' }).result;
  }

  getWeights(): Promise<NamedTensors> {
    return this.call<NamedTensors>({ type: 'getWeights' }).result;
  }

  /** The weights are copied to the thread (the caller's arrays stay usable). */
  async setWeights(weights: NamedTensors, policyVersion: number): Promise<void> {
    await this.call<void>({ type: 'setWeights', weights, policyVersion }).result;
    this.info.policyVersion = policyVersion;
  }

  async getOptimizerState(): Promise<OptimizerState> {
    return this.call<OptimizerState>({ type: 'getOptimizerState' }).result;
  }

  /** The moments are copied to the thread (the caller's arrays stay usable). */
  async setOptimizerState(state: OptimizerState): Promise<void> {
    await this.call<void>({ type: 'setOptimizerState', state }).result;
  }

  save(dir: string): Promise<{ files: string[] }> {
    return this.call<{ files: string[] }>({ type: 'save', dir }).result;
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    // Calls made after close fail fast with EngineClosedError (the exit handler sets it as the failure).
    if (!this.failure) await this.call<void>({ type: 'close' }).result.catch(() => undefined);
    await this.worker.terminate();
  }

  crashForTest(): void {
    this.worker.postMessage({ id: this.nextId++, type: 'crash' } satisfies EngineRequest);
  }
}

/**
 * The thread's first code: register tsx's loader, then import the .ts entry. (On Node 20, `execArgv: ['--import',
 * 'tsx']` does not reach a worker's entry module: it fails with "Unknown file extension .ts"; registering from a
 * small eval'd bootstrap works from tsx and from vitest alike.)
 */
function threadBootstrap(entry: string): string {
  return `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
}

/** Start an engine in its own worker thread. Resolves once the model is loaded and the backend chosen. */
export async function startEngine(options: EngineOptions): Promise<ThreadEngine> {
  const worker = new Worker(threadBootstrap(new URL('./engine-thread.ts', import.meta.url).href), { eval: true, execArgv: [] });
  const client = new EngineThreadClient(worker);
  try {
    await client.init(options);
  } catch (err) {
    await worker.terminate();
    throw err;
  }
  return client;
}
