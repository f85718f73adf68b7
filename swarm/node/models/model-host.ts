/**
 * The model host: every model this peer serves, one trainer engine (a worker thread) each, with its tokenizer and
 * chat template on the main thread for the gateway. A model trained asynchronously may also have a sampler engine
 * of its own (a second worker thread) that serves its calls while the trainer updates; `syncSampler` hands it the
 * trainer's weights after each change.
 *
 * Who uses what:
 * - the gateway and the episode service read `HostedModel` (tokenizer, template, state), sample through `generate` and admit / release
 *   episodes through `admitEpisode` / `releaseEpisode` (the pool);
 * - the training loop (swarm/node/training) drives the state machine and the weights:
 *
 *     model.onEpisodeDone((done) => …)          // a train episode ended (or was aborted): maybe a batch is ready
 *     await model.drain()                       // state 'draining': no new episodes; resolves when none is in flight
 *     model.setState('updating')                // gateway answers 503 + Retry-After meanwhile
 *     await model.engine.trainStep(samples)     // runs in the engine's worker thread
 *     await model.syncSampler(metrics.policyVersion)  // a separate sampler takes the new weights
 *     model.setPolicy(metrics.policyVersion, step)
 *     model.resume()                            // back to 'rolling' (episodes in flight) or 'idle'
 *
 * States: loading → idle ⇄ rolling → draining → updating → rolling|idle; any → failed (engine could not start).
 * `idle → rolling` happens by itself when an episode is admitted, `rolling → idle` when the last one leaves.
 */
import { EventEmitter } from 'node:events';
import type { ModelStatus } from '../../common/api.ts';
import type { BackendName, BackendReport, GenerateResult, LoraConfig, ModelSource, TrainerEngine } from '../../../worker/common/engine.ts';
import type { ChatTemplate, Tokenizer } from '../../../worker/tokenizer/types.ts';
import type { TokenizerBundle } from '../../../worker/tokenizer/load.ts';

export type EngineState = ModelStatus['engineState'];

/** Episodes per model at once, unless configured: enough for a few GRPO groups in flight. */
export const DEFAULT_POOL_LIMIT = 64;

/**
 * How long a drain waits for the episodes in flight before the stragglers are aborted, unless configured: long
 * enough for an agent's slow tool call, short enough that one idle episode cannot hold every other agent at 503.
 */
export const DEFAULT_DRAIN_TIMEOUT_S = 60;

/**
 * The longest idle timeout an episode may ask for, unless configured: an hour covers slow tools and human-in-the-loop
 * steps; a dead client's pool slot is freed within it.
 */
export const DEFAULT_MAX_IDLE_TIMEOUT_S = 3600;

/**
 * How long a train begin that the staleness bound refuses is held open, waiting for the gate, before it is answered
 * 429 staleness_bound as before, unless configured. The gate opens when a step takes its batch or an episode in flight is
 * aborted: usually within a step's time. Well inside the 30 s every client of a begin waits (the runner, both SDKs,
 * the p2p episode protocol), so a held begin is answered before its client gives up.
 */
export const DEFAULT_ADMISSION_HOLD_MS = 10_000;

/**
 * Train begins held at once per model; one more is answered 429 at once. Each is an open request and a timer:
 * far more than η + 1 batches of honest clients, few enough that a flood of begins costs the peer little.
 */
export const MAX_HELD_ADMISSIONS = 256;

/** What a finished episode tells the training loop. Rewards and timelines are in the store by then (same transaction). */
export interface EpisodeDone {
  episodeId: string;
  model: string;
  /** The GRPO group (= task id). */
  groupId: string;
  kind: 'train' | 'eval';
  /** ended: reward reported and stored; aborted: never trained on. */
  outcome: 'ended' | 'aborted';
  reward: number | null;
  /** Policy version when the episode began. */
  policyVersion: number;
}

export class ModelNotReadyError extends Error {
  override name = 'ModelNotReadyError';
  constructor(
    readonly model: string,
    readonly state: EngineState,
  ) {
    super(`model "${model}" is ${state}`);
  }
}

/** A train episode was refused for now by the asynchronous staleness bound (`reason` says why); retry shortly. */
export class AdmissionThrottledError extends Error {
  override name = 'AdmissionThrottledError';
  constructor(
    readonly model: string,
    readonly reason: string,
  ) {
    super(`model "${model}" admits no train episode now: ${reason}`);
  }
}

/** Whether one more train episode may start now: null, or why not (the training loop's staleness bound). */
export type AdmissionGate = () => string | null;

/** A train begin waiting for the staleness bound (admitEpisodeWhenOpen). */
interface HeldAdmission {
  episodeId: string;
  /** Answers the begin: admitted (null) or refused with the error. */
  settle(error: Error | null): void;
}

export class PoolFullError extends Error {
  override name = 'PoolFullError';
  constructor(
    readonly model: string,
    readonly limit: number,
  ) {
    super(`model "${model}" already runs ${limit} episodes (its pool limit); retry when one ends`);
  }
}

export class ModelSpecError extends Error {
  override name = 'ModelSpecError';
}

export interface HostedModelSpec {
  /** The name clients send as `model` (defaults to the source's name). */
  name: string;
  source: ModelSource;
  aliases: string[];
  poolLimit: number;
  /** How long a drain waits for the episodes in flight (default DEFAULT_DRAIN_TIMEOUT_S). */
  drainTimeoutS?: number;
  /** Episodes asking for a longer idle timeout get this one (default DEFAULT_MAX_IDLE_TIMEOUT_S). */
  maxIdleTimeoutS?: number;
  /** How long a train begin refused by the staleness bound waits for it (default DEFAULT_ADMISSION_HOLD_MS; 0: answered at once). */
  admissionHoldMs?: number;
  /** How its engine starts: LoRA adapters and the seed (its training settings say; fixed for the engine's life). */
  engine?: EngineStartOptions;
}

export class HostedModel {
  readonly name: string;
  readonly aliases: readonly string[];
  readonly source: ModelSource;
  state: EngineState = 'loading';
  /** Set when the engine could not start. */
  error: string | undefined;
  /** The weights' version: bumped by every optimizer step, stamped on every call and episode. */
  policyVersion = 0;
  /** Optimizer steps done by this peer's training loop. */
  step = 0;
  readonly pool: { active: number; limit: number };
  readonly drainTimeoutS: number;
  readonly maxIdleTimeoutS: number;
  readonly admissionHoldMs: number;
  private readonly activeEpisodes = new Set<string>();
  /** Train begins waiting for the staleness bound, first come first admitted. */
  private readonly heldAdmissions: HeldAdmission[] = [];
  private reopening = false;
  private readonly activeTrain = new Set<string>();
  private admissionGate: AdmissionGate | null = null;
  /** Generations under way on the sampler, and the busy time they add up to (`samplerBusyMs`). */
  private generating = 0;
  private busySince = 0;
  private busyMs = 0;
  private readonly events = new EventEmitter<{ done: [EpisodeDone]; state: [EngineState]; empty: []; overdue: [string[]]; policy: [number] }>();
  private loaded: { engine: TrainerEngine; sampler: TrainerEngine | null; tokenizer: Tokenizer; template: ChatTemplate } | undefined;

  readonly engineOptions: EngineStartOptions;

  constructor(spec: HostedModelSpec) {
    this.name = spec.name;
    this.aliases = spec.aliases;
    this.source = spec.source;
    this.pool = { active: 0, limit: spec.poolLimit };
    this.drainTimeoutS = spec.drainTimeoutS ?? DEFAULT_DRAIN_TIMEOUT_S;
    this.maxIdleTimeoutS = spec.maxIdleTimeoutS ?? DEFAULT_MAX_IDLE_TIMEOUT_S;
    this.admissionHoldMs = spec.admissionHoldMs ?? DEFAULT_ADMISSION_HOLD_MS;
    this.engineOptions = spec.engine ?? {};
  }

  /** The trainer: updates, weights, checkpoints (and every call too, unless the model has a sampler of its own). */
  get engine(): TrainerEngine {
    return this.require().engine;
  }
  /** The engine that serves the model's calls: the sampler engine when there is one, else the trainer. */
  get sampler(): TrainerEngine {
    const { engine, sampler } = this.require();
    return sampler ?? engine;
  }
  /**
   * Samples on the sampler engine (what the gateway calls), timing the share of time it has any generation under
   * way for the step metrics (`samplerBusyMs`). A call held by a shared engine's update counts as under way.
   */
  async generate(...args: Parameters<TrainerEngine['generate']>): Promise<GenerateResult> {
    if (this.generating++ === 0) this.busySince = performance.now();
    try {
      return await this.sampler.generate(...args);
    } finally {
      if (--this.generating === 0) this.busyMs += performance.now() - this.busySince;
    }
  }

  /** Milliseconds in which the sampler had a generation under way, since the model loaded (the current one included). */
  get samplerBusyMs(): number {
    return this.busyMs + (this.generating > 0 ? performance.now() - this.busySince : 0);
  }

  get tokenizer(): Tokenizer {
    return this.require().tokenizer;
  }
  get template(): ChatTemplate {
    return this.require().template;
  }
  get backendReport(): BackendReport | null {
    return this.loaded?.engine.info.backend ?? null;
  }

  /** The name and every alias: what a client may send as `model`. */
  get names(): string[] {
    return [this.name, ...this.aliases];
  }

  answersTo(name: string): boolean {
    return name === this.name || this.aliases.includes(name);
  }

  /** Called once by the host when the engines and tokenizer are up. */
  attach(engine: TrainerEngine, bundle: TokenizerBundle, sampler: TrainerEngine | null = null): void {
    this.loaded = { engine, sampler, tokenizer: bundle.tokenizer, template: bundle.template };
    this.policyVersion = engine.info.policyVersion;
    this.setState('idle');
  }

  fail(error: string): void {
    this.error = error;
    this.setState('failed');
  }

  setState(state: EngineState): void {
    if (this.state === state) return;
    this.state = state;
    this.events.emit('state', state);
    // A model that drains, updates or failed answers the begins it holds as it would answer new ones.
    this.reopenAdmissions();
  }

  /**
   * Gives the sampler engine, when the model has one, the trainer's weights as `policyVersion` (the adapters only,
   * with LoRA: both engines hold the same frozen base). The calls under way finish on the old weights and the
   * next ones run on the new, as on a shared engine. Call it after every change of the trainer's weights.
   */
  async syncSampler(policyVersion: number): Promise<void> {
    const { engine, sampler } = this.require();
    if (!sampler) return;
    await sampler.setWeights(await engine.getWeights(), policyVersion);
  }

  /** After an update: new weights are live. */
  setPolicy(policyVersion: number, step: number): void {
    const newer = policyVersion > this.policyVersion;
    this.policyVersion = policyVersion;
    this.step = step;
    if (newer) this.events.emit('policy', policyVersion);
  }

  /** Hears every newer policy version once it is live (after a step, synchronous or not; a replica's load). */
  onPolicyChange(listener: (policyVersion: number) => void): () => void {
    this.events.on('policy', listener);
    return () => this.events.off('policy', listener);
  }

  /** Train episodes in flight (eval episodes aside). */
  get activeTrainEpisodes(): number {
    return this.activeTrain.size;
  }

  /** Installs the gate new train episodes pass (asynchronous training); returns its removal. */
  setAdmissionGate(gate: AdmissionGate): () => void {
    this.admissionGate = gate;
    return () => {
      if (this.admissionGate === gate) this.admissionGate = null;
      this.reopenAdmissions();
    };
  }

  /** Leave draining/updating: 'rolling' when episodes are in flight, else 'idle'. */
  resume(): void {
    this.setState(this.pool.active > 0 ? 'rolling' : 'idle');
  }

  /** Whether new episodes may start now (the pool aside). */
  get acceptsEpisodes(): boolean {
    return this.state === 'idle' || this.state === 'rolling';
  }

  /** Reserves a pool slot for a new episode; throws ModelNotReadyError, PoolFullError or AdmissionThrottledError. */
  admitEpisode(episodeId: string, kind: 'train' | 'eval' = 'train'): void {
    this.refuseUnlessReady();
    const refusal = kind === 'train' ? (this.admissionGate?.() ?? null) : null;
    if (refusal) throw new AdmissionThrottledError(this.name, refusal);
    if (kind === 'train') this.activeTrain.add(episodeId);
    this.activeEpisodes.add(episodeId);
    this.pool.active = this.activeEpisodes.size;
    if (this.state === 'idle') this.setState('rolling');
  }

  /**
   * Like admitEpisode, but a train episode the staleness bound refuses waits for the gate to open instead of being
   * refused at once: a client gets its slot as soon as a step has taken the episodes ahead of it, rather than
   * backing off blind (a runner holds its whole script for the Retry-After). Held begins are admitted first come
   * first served, and a new one waits behind them. The model not accepting episodes and a full pool are answered at
   * once as by admitEpisode; a held begin is answered with the error that applies when the gate opens (the model
   * drained, the pool filled), with AdmissionThrottledError after `admissionHoldMs` or beyond MAX_HELD_ADMISSIONS,
   * and with the signal's reason when the client goes away (its begin is then never admitted).
   */
  async admitEpisodeWhenOpen(episodeId: string, kind: 'train' | 'eval', signal?: AbortSignal): Promise<void> {
    if (kind === 'eval') return this.admitEpisode(episodeId, kind);
    this.reopenAdmissions();
    if (this.heldAdmissions.length === 0) {
      try {
        return this.admitEpisode(episodeId, kind);
      } catch (err) {
        if (!(err instanceof AdmissionThrottledError) || this.admissionHoldMs <= 0 || this.heldAdmissions.length >= MAX_HELD_ADMISSIONS) throw err;
      }
    } else {
      // Behind the held ones, whatever the gate says now; what would refuse it at once still does.
      this.refuseUnlessReady();
      if (this.heldAdmissions.length >= MAX_HELD_ADMISSIONS) throw new AdmissionThrottledError(this.name, `${this.heldAdmissions.length} train episodes are already waiting for the staleness bound`);
    }
    signal?.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const held: HeldAdmission = {
        episodeId,
        settle: (error) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          if (error) reject(error);
          else resolve();
        },
      };
      const drop = (error: Error) => {
        const at = this.heldAdmissions.indexOf(held);
        if (at < 0) return;
        this.heldAdmissions.splice(at, 1);
        held.settle(error);
      };
      const timer = setTimeout(() => drop(new AdmissionThrottledError(this.name, this.admissionGate?.() ?? 'the staleness bound stayed closed')), this.admissionHoldMs);
      const onAbort = () => drop(signal!.reason instanceof Error ? signal!.reason : new Error(String(signal!.reason)));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.heldAdmissions.push(held);
    });
  }

  /** Train begins waiting for the staleness bound now. */
  get heldAdmissionCount(): number {
    return this.heldAdmissions.length;
  }

  /**
   * Admits the held train begins, in order, while the gate lets them in; answers those the model now refuses for
   * another reason. The training loop calls it when the bound may have opened (a step took its batch, its status
   * or settings changed); the model itself when an episode leaves, its state changes or the gate goes.
   */
  reopenAdmissions(): void {
    // Admitting one may change the state (idle → rolling), which calls this again: the outer loop goes on.
    if (this.reopening) return;
    this.reopening = true;
    try {
      while (this.heldAdmissions.length > 0) {
        const held = this.heldAdmissions[0];
        let error: Error | null = null;
        try {
          this.admitEpisode(held.episodeId, 'train');
        } catch (err) {
          if (err instanceof AdmissionThrottledError) return;
          error = err as Error;
        }
        this.heldAdmissions.shift();
        held.settle(error);
      }
    } finally {
      this.reopening = false;
    }
  }

  /** What refuses any new episode at once: a model that does not take episodes now, a full pool. */
  private refuseUnlessReady(): void {
    if (!this.acceptsEpisodes) throw new ModelNotReadyError(this.name, this.state);
    if (this.pool.active >= this.pool.limit) throw new PoolFullError(this.name, this.pool.limit);
  }

  /** Frees the episode's slot and tells listeners (the training loop) how it finished. Idempotent per episode. */
  releaseEpisode(done: EpisodeDone): void {
    if (!this.activeEpisodes.delete(done.episodeId)) return;
    this.activeTrain.delete(done.episodeId);
    this.pool.active = this.activeEpisodes.size;
    if (this.pool.active === 0 && this.state === 'rolling') this.setState('idle');
    this.events.emit('done', done);
    if (this.pool.active === 0) this.events.emit('empty');
    // After the listeners: the training loop has counted the episode (queued, dropped or gone) by now.
    this.reopenAdmissions();
  }

  /**
   * Stops admitting episodes ('draining') and resolves once every in-flight episode has ended or been aborted. Those
   * still in flight after `drainTimeoutS` are handed to the onDrainOverdue listeners (the episode service aborts
   * them), so a drain is bounded.
   */
  async drain(): Promise<void> {
    this.setState('draining');
    if (this.pool.active === 0) return;
    const timer = setTimeout(() => this.events.emit('overdue', [...this.activeEpisodes]), this.drainTimeoutS * 1000);
    try {
      await this.whenNoEpisodes();
    } finally {
      clearTimeout(timer);
    }
  }

  /** Episodes a drain waited for longer than `drainTimeoutS`. */
  onDrainOverdue(listener: (episodeIds: string[]) => void): () => void {
    this.events.on('overdue', listener);
    return () => this.events.off('overdue', listener);
  }

  whenNoEpisodes(): Promise<void> {
    if (this.pool.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.events.once('empty', resolve));
  }

  onEpisodeDone(listener: (done: EpisodeDone) => void): () => void {
    this.events.on('done', listener);
    return () => this.events.off('done', listener);
  }

  onStateChange(listener: (state: EngineState) => void): () => void {
    this.events.on('state', listener);
    return () => this.events.off('state', listener);
  }

  status(): ModelStatus {
    const status: ModelStatus = {
      name: this.name,
      source: formatModelSource(this.source),
      engineState: this.state,
      policyVersion: this.policyVersion,
      step: this.step,
      backend: this.backendReport?.name ?? null,
      pool: { ...this.pool },
    };
    if (this.loaded) status.sampler = this.loaded.sampler ? 'separate' : 'shared';
    if (this.error) status.error = this.error;
    return status;
  }

  /** Stops the engine's worker thread (safe to call twice, and before loading finished). */
  async close(): Promise<void> {
    for (const held of this.heldAdmissions.splice(0)) held.settle(new AdmissionThrottledError(this.name, 'the model is closing'));
    const loaded = this.loaded;
    this.loaded = undefined;
    if (loaded) await Promise.all([loaded.engine.close(), loaded.sampler?.close()]);
  }

  private require() {
    if (!this.loaded) throw new ModelNotReadyError(this.name, this.state);
    return this.loaded;
  }
}

/** Starts one engine for a source; the default starts a worker thread (worker/node/engine-client.ts). */
export type EngineStarter = (source: ModelSource, options?: EngineStartOptions) => Promise<TrainerEngine>;

export interface EngineStartOptions {
  lora?: LoraConfig | null;
  seed?: number;
  /** Where the host already knows it (a sampler starts on its trainer's backend); otherwise the engine chooses. */
  backend?: BackendName;
  /** Start a second engine, with the same options, that serves the model's calls (training's `sampler` setting). */
  separateSampler?: boolean;
}
export type TokenizerLoader = (source: ModelSource) => Promise<TokenizerBundle>;

export interface ModelHostOptions {
  startEngine: EngineStarter;
  loadTokenizer: TokenizerLoader;
  onError?: (model: string, error: Error) => void;
}

/** Every hosted model of the peer, looked up by name or alias. */
export class ModelHost {
  readonly models: HostedModel[] = [];

  constructor(private readonly options: ModelHostOptions) {}

  /**
   * Registers the models and loads them all in parallel; resolves when every one is idle or failed. A model that
   * fails stays listed as 'failed' with its error (the peer keeps serving the others).
   */
  async load(specs: HostedModelSpec[]): Promise<void> {
    const added: HostedModel[] = [];
    for (const spec of specs) {
      for (const name of [spec.name, ...spec.aliases]) {
        if (this.find(name)) throw new ModelSpecError(`model name "${name}" is used twice; names and aliases must be unique`);
      }
      const model = new HostedModel(spec);
      this.models.push(model);
      added.push(model);
    }
    await Promise.all(added.map((model) => this.loadOne(model)));
  }

  private async loadOne(model: HostedModel): Promise<void> {
    try {
      // All settle before anything is decided: an engine whose tokenizer (or sibling) failed must still be closed, or
      // its worker thread keeps the process alive after the peer stopped.
      const { separateSampler, ...engineOptions } = model.engineOptions;
      const [bundle, engine] = await Promise.allSettled([this.options.loadTokenizer(model.source), this.options.startEngine(model.source, engineOptions)]);
      // The sampler starts on the backend the trainer chose: one measurement, and both engines compute alike.
      const [sampler] = await Promise.allSettled([
        separateSampler && engine.status === 'fulfilled' ? this.options.startEngine(model.source, { ...engineOptions, backend: engine.value.info.backend.name }) : null,
      ]);
      if (bundle.status === 'rejected' || engine.status === 'rejected' || sampler.status === 'rejected') {
        for (const started of [engine, sampler]) if (started.status === 'fulfilled') await started.value?.close().catch(() => undefined);
        const failed = [bundle, engine, sampler].find((r) => r.status === 'rejected') as PromiseRejectedResult;
        throw failed.reason;
      }
      model.attach(engine.value, bundle.value, sampler.value);
    } catch (err) {
      model.fail(`${(err as Error).name}: ${(err as Error).message}`);
      this.options.onError?.(model.name, err as Error);
    }
  }

  find(name: string): HostedModel | undefined {
    return this.models.find((m) => m.answersTo(name));
  }

  status(): ModelStatus[] {
    return this.models.map((m) => m.status());
  }

  /** The backend of the first engine that started, for status.backend. */
  backend(): { name: string; reason: string } | null {
    for (const model of this.models) {
      const report = model.backendReport;
      if (report) return { name: report.name, reason: report.reason };
    }
    return null;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.models.map((m) => m.close()));
  }
}

/** `builtin:tiny` or an absolute folder path. */
export function formatModelSource(source: ModelSource): string {
  return source.kind === 'builtin' ? `builtin:${source.name}` : source.path;
}
