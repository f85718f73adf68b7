/**
 * The trainer engine on the current thread: one hosted model, its sampler (continuous batching), its optimizer and
 * optional LoRA adapters, behind the TrainerEngine contract. worker/node/engine-thread.ts runs it in a worker
 * thread; tests and benchmarks may use it directly.
 *
 * Loading from disk is the caller's job (worker/node/load-model.ts): this module takes weights in memory and a
 * CheckpointWriter for `save`.
 */
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend, selectBackend } from './backend.ts';
import { EngineClosedError } from './common/protocol.ts';
import type { BackendName, DecoderConfig, GeneratedToken, GenerateRequest, GenerateResult, LoraConfig, ModelInfo, NamedTensors, OptimizerState, PrecisionReport, TrainerEngine, TrainMetrics, TrainOptions, TrainPrecision, TrainSample } from './common/engine.ts';
import { createLora, effectiveParams, loadPeftIntoLora, loraToPeft, loraVariables, mergedParams, type LoraState } from './lora.ts';
import { countParameters, decodeHostWeights, decodeStep, type DecodeHostWeights, disposeDecodeHostWeights, extendStep, fromParams, fuseWeights, isLinearWeight, type ModelWeights, type Params, prefill, prefillBatch, toInternal, toParams, validateConfig } from './model.ts';
import { AdamW, OptimizerStateError } from './optimizer.ts';
import { LossScaler } from './loss-scale.ts';
import { choosePrecision } from './precision.ts';
import type { HostKvCache } from './kv-cache.ts';
import { ContinuousBatcher, type DecoderRuntime, type Prefilled } from './sampler.ts';
import { PrefixStore, sharedPrefixGroups } from './prefix-store.ts';
import { decodeOnDevice, decodeOnDeviceSampled, decodePaged, decodePagedSampled, type DeviceDecodeWeights, deviceDecodeWeights, disposeDeviceDecodeWeights, extendPaged, extendPagedSampled, pagedDecodingRuns, prefillOnDevice, prefillPaged, type TensorKvCache } from './tensor-decode.ts';
import { devicePoolPages, PAGE_SLOTS, PagedKvPool, PagedKvPoolFullError, type PagedKvSequence } from './webgpu/paged-kv-cache.ts';
import { PagedPrefixStore } from './webgpu/paged-prefix-store.ts';
import { releaseStaleF16Copies } from './webgpu/matmul.ts';
import { type DeviceSampling, deviceSamplingRuns } from './webgpu/sample.ts';
import { DEFAULT_TRAIN_OPTIONS, sequenceLogprobs, trainStep } from './train.ts';
import type { Tokenizer } from './tokenizer/types.ts';
import { checkDecoderTensors } from './checkpoint/decoder-tensors.ts';
import { MissingTensorError, TensorShapeError } from './checkpoint/errors.ts';
import { peftConfigFromLora, type PeftAdapterConfig } from './checkpoint/peft-config.ts';

export class SaveNotSupportedError extends Error {
  override name = 'SaveNotSupportedError';
}

/** Writes checkpoints (provided by the Node side, which owns the file system). */
export interface CheckpointWriter {
  writeModel(dir: string, config: DecoderConfig, tensors: NamedTensors): Promise<{ files: string[] }>;
  writeAdapter(dir: string, adapterConfig: PeftAdapterConfig, tensors: NamedTensors): Promise<{ files: string[] }>;
}

export interface EngineInit {
  name: string;
  config: DecoderConfig;
  /** Base weights, Hugging Face names and layout. */
  weights: NamedTensors;
  /** Needed for stop strings; null disables them. */
  tokenizer: Tokenizer | null;
  lora?: LoraConfig | null;
  /** PEFT adapter tensors to start the LoRA from (otherwise fresh adapters). */
  adapter?: NamedTensors | null;
  backend?: BackendName;
  seed?: number;
  /**
   * Bytes of finished sequences' KV caches kept for prompts that start the same way (host decoding); 0 turns it off,
   * also on the device, whose kept sequences live in the paged pool and are bounded by it (paged-prefix-store.ts).
   */
  prefixCacheBytes?: number;
  /** Bytes of the paged KV cache on the device (webgpu; allocated at the first prompt), shared by running sequences. */
  deviceKvCacheBytes?: number;
  /**
   * 'mixed': train with f16 products and f32 master weights, optimizer state and accumulation, with dynamic loss
   * scaling, where the device allows (webgpu with shader-f16) and its self-check passes; otherwise f32, with the
   * reason in `info.precision` (worker/precision.ts). Default 'f32'. Sampling and scoring stay f32 either way.
   */
  precision?: TrainPrecision;
  /** Mixed precision's first loss scale (a power of two; default INITIAL_LOSS_SCALE, worker/loss-scale.ts). */
  initialLossScale?: number;
  writer?: CheckpointWriter;
}

interface InferenceWeights {
  weights: ModelWeights;
  /** Host copies for model.ts's decodeStep/extendStep; null on backends that read asynchronously (they decode on the device). */
  host: DecodeHostWeights | null;
  /** Fused weights for tensor-decode.ts's decodeOnDevice; null where the host decodes. */
  device: DeviceDecodeWeights | null;
  merged: Params | null;
}

/** Default budget of the prefix cache. */
const DEFAULT_PREFIX_CACHE_BYTES = 2 ** 30;
/**
 * Prompts longer than this beyond their cached prefix are prefilled from scratch: extendStep attends row by row
 * (cost grows with the square of the new part), the full forward in blocked matmuls.
 */
const MAX_TOKENS_AFTER_PREFIX = 2048;

/** Default size of the device's paged KV cache (it never takes more than DEVICE_KV_SEQUENCES full contexts need). */
const DEFAULT_DEVICE_KV_CACHE_BYTES = 2 ** 30;
/** Sequences the device KV cache is sized for at most: the batcher's MAX_BATCH (sampler.ts). */
const DEVICE_KV_SEQUENCES = 32;

/**
 * The pick for a prefill whose end nobody samples (a shared prefix: its members continue it): greedy, no draw, so
 * that two floats are read back instead of its logits.
 */
const UNREAD_END: DeviceSampling = { invTemperature: 0, topK: 0, topP: 1, draw: 0 };

/** Token budget of one forward when scoring sequences (logprobs, KL reference). */
const SCORING_TOKEN_BUDGET = 8192;

export class LocalEngine implements TrainerEngine {
  readonly info: ModelInfo;
  private params: Params;
  private lora: LoraState | null;
  private trainable: tf.Variable[];
  /** The trainable variables' names, in their order (keys of the optimizer state). */
  private trainableNames: string[];
  private optimizer: AdamW | null = null;
  private reference: Params | null = null;
  private inference: InferenceWeights | null = null;
  private readonly batcher: ContinuousBatcher;
  /** Finished sequences' host KV caches, for prompts that continue them; cleared whenever the weights change. */
  private readonly prefixes: PrefixStore;
  /** The paged KV cache of device decoding on webgpu, made at the first prompt. */
  private kvPool: PagedKvPool | null = null;
  /** Finished sequences of the paged pool, for prompts that continue them (null with prefixCacheBytes 0); cleared whenever the weights change. */
  private devicePrefixes: PagedPrefixStore | null = null;
  /** Mixed precision's loss scale, kept across steps; null when training in f32. */
  private readonly lossScaler: LossScaler | null;
  private closed = false;

  constructor(
    private readonly init: EngineInit,
    backend: ModelInfo['backend'],
    precision: PrecisionReport = { requested: 'f32', active: 'f32', reason: 'requested' },
  ) {
    const cfg = init.config;
    validateConfig(cfg);
    checkDecoderTensors(cfg, init.weights);
    this.lora = null;
    // Full fine-tuning trains every base weight; with LoRA the base is frozen (plain tensors) and only adapters train.
    this.params = toParams(init.weights, !init.lora);
    if (init.lora) {
      this.lora = createLora(cfg, init.lora, this.params, init.seed ?? 0);
      if (init.adapter) loadPeftIntoLora(this.lora, init.adapter);
      this.trainable = loraVariables(this.lora);
      // loraVariables' order: each target weight's A then B.
      this.trainableNames = Object.keys(this.lora.a).flatMap((n) => [`${n}.lora_A`, `${n}.lora_B`]);
    } else {
      this.trainable = Object.values(this.params) as tf.Variable[];
      this.trainableNames = Object.keys(this.params);
    }
    const paramCount = countParameters(cfg);
    this.info = {
      name: init.name,
      config: cfg,
      paramCount,
      trainableParamCount: this.trainable.reduce((a, v) => a + v.size, 0),
      policyVersion: 0,
      lora: init.lora ?? null,
      backend,
      precision,
    };
    this.lossScaler = precision.active === 'mixed' ? new LossScaler(init.initialLossScale) : null;
    this.prefixes = new PrefixStore(init.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE_BYTES);
    this.batcher = new ContinuousBatcher(readsSyncOnActiveBackend() ? this.hostDecoding() : pagedDecodingRuns(cfg) ? this.pagedDecoding() : this.deviceDecoding(), init.tokenizer);
  }

  /** wasm/cpu: host KV caches read by the SIMD attention kernel, answered synchronously (model.ts, kv-cache.ts). */
  private hostDecoding(): DecoderRuntime<HostKvCache> {
    const cfg = this.init.config;
    return {
      contextLength: cfg.max_position_embeddings,
      vocabSize: cfg.vocab_size,
      prefill: (prompts) => this.prefillOnHost(prompts),
      decode: (caches, tokens) => {
        const w = this.inferenceWeights();
        return decodeStep(cfg, w.weights, w.host!, caches, tokens);
      },
      release: (cache) => this.prefixes.put(cache),
      policyVersion: () => this.info.policyVersion,
    };
  }

  /**
   * Prompts that continue a cached prefix copy it and compute only the rest (extendStep). Fresh prompts that share a
   * prefix with each other (a group's repeats started together) have it prefilled once and stored, so every one of
   * them, and the repeats that start while they run, continue it. The other prompts are prefilled together in one
   * forward, and their prompt caches kept in the store as well.
   */
  private prefillOnHost(prompts: number[][]): Prefilled<HostKvCache>[] {
    const cfg = this.init.config;
    const w = this.inferenceWeights();
    const results: Prefilled<HostKvCache>[] = new Array(prompts.length);
    const continued: { index: number; cache: HostKvCache; reusedTokens: number }[] = [];
    const taken = prompts.map((prompt) => this.prefixes.take(prompt, MAX_TOKENS_AFTER_PREFIX));
    prompts.forEach((_, index) => {
      const cache = taken[index];
      if (cache) continued.push({ index, cache, reusedTokens: cache.length });
    });
    const uncached = prompts.map((_, i) => i).filter((i) => !taken[i]);
    const grouped = new Set<number>();
    for (const group of sharedPrefixGroups(uncached.map((i) => prompts[i]))) {
      const members = group.members.map((k) => uncached[k]);
      if (members.some((i) => prompts[i].length - group.length > MAX_TOKENS_AFTER_PREFIX)) continue;
      const shared = prefill(cfg, w.weights, prompts[members[0]].slice(0, group.length)).cache;
      // The first member pays for the shared prefix; the others reuse it.
      members.forEach((index, k) => {
        grouped.add(index);
        continued.push({ index, cache: shared.copyPrefix(group.length), reusedTokens: k === 0 ? 0 : group.length });
      });
      this.prefixes.put(shared);
    }
    const fresh = uncached.filter((i) => !grouped.has(i));
    if (fresh.length > 0) {
      prefillBatch(cfg, w.weights, fresh.map((i) => prompts[i])).forEach((r, k) => {
        results[fresh[k]] = r;
        this.prefixes.put(r.cache.copyPrefix(r.cache.length));
      });
    }
    if (continued.length > 0) {
      const rest = continued.map(({ index, cache }) => prompts[index].slice(cache.length));
      const logits = extendStep(cfg, w.weights, w.host!, continued.map((c) => c.cache), rest);
      const v = cfg.vocab_size;
      continued.forEach(({ index, cache, reusedTokens }, k) => (results[index] = { cache, logits: logits.slice(k * v, (k + 1) * v), reusedTokens }));
    }
    return results;
  }

  /**
   * Backends that read asynchronously where the paged kernels do not run: per-sequence device KV caches
   * (tensor-decode.ts); a step reads its tokens where our sampling kernel runs, else its logits.
   */
  private deviceDecoding(): DecoderRuntime<TensorKvCache> {
    const cfg = this.init.config;
    return {
      contextLength: cfg.max_position_embeddings,
      vocabSize: cfg.vocab_size,
      prefill: (prompts, picks) => prefillOnDevice(cfg, this.inferenceWeights().weights, prompts, picks ?? null),
      decode: (caches, tokens) => {
        const w = this.inferenceWeights();
        return decodeOnDevice(cfg, w.weights, w.device!, caches, tokens);
      },
      ...(deviceSamplingRuns() && {
        decodeSampled: (caches: TensorKvCache[], tokens: number[], picks: DeviceSampling[], logitRows: number[]) => {
          const w = this.inferenceWeights();
          return decodeOnDeviceSampled(cfg, w.weights, w.device!, caches, tokens, picks, logitRows);
        },
      }),
      release: (cache) => cache.dispose(),
      policyVersion: () => this.info.policyVersion,
    };
  }

  /**
   * Webgpu with our kernels: one paged KV cache on the device for every sequence, one attention dispatch per layer,
   * tokens sampled on the device (one read of a token and a logprob per sequence per step).
   */
  private pagedDecoding(): DecoderRuntime<PagedKvSequence> {
    const cfg = this.init.config;
    const pool = () => {
      const dims = { layers: cfg.num_hidden_layers, kvHeads: cfg.num_key_value_heads, headDim: cfg.head_dim };
      const wanted = DEVICE_KV_SEQUENCES * Math.ceil(cfg.max_position_embeddings / PAGE_SLOTS);
      if (!this.kvPool) {
        this.kvPool = new PagedKvPool(dims, devicePoolPages(dims, this.init.deviceKvCacheBytes ?? DEFAULT_DEVICE_KV_CACHE_BYTES, wanted));
        if (this.init.prefixCacheBytes !== 0) this.devicePrefixes = new PagedPrefixStore(this.kvPool);
      }
      return this.kvPool;
    };
    return {
      contextLength: cfg.max_position_embeddings,
      vocabSize: cfg.vocab_size,
      prefill: (prompts, picks) => this.prefillPagedWithPrefixes(pool(), prompts, picks ?? null),
      decode: (seqs, tokens) => {
        const w = this.inferenceWeights();
        return decodePaged(cfg, w.weights, w.device!, seqs, tokens);
      },
      ...(deviceSamplingRuns() && {
        decodeSampled: (seqs: PagedKvSequence[], tokens: number[], picks: DeviceSampling[], logitRows: number[]) => {
          const w = this.inferenceWeights();
          return decodePagedSampled(cfg, w.weights, w.device!, seqs, tokens, picks, logitRows);
        },
      }),
      release: (seq) => (this.devicePrefixes ? this.devicePrefixes.put(seq) : seq.pool.release(seq)),
      isOutOfRoom: (err) => err instanceof PagedKvPoolFullError,
      policyVersion: () => this.info.policyVersion,
    };
  }

  /**
   * Prompts that continue a kept sequence share its pages and compute only the rest (extendPaged). Fresh prompts that
   * share a prefix with each other (a group's repeats started together) have its whole pages prefilled once and
   * kept, and every one of them continues it. The other prompts are prefilled together. Every finished sequence is
   * kept (release → the store), so the next turn of a conversation or another sample of a prompt continues it.
   * With `picks`, each prompt's first token is sampled on the device (its logits are not read).
   */
  private async prefillPagedWithPrefixes(pool: PagedKvPool, prompts: number[][], picks: DeviceSampling[] | null): Promise<Prefilled<PagedKvSequence>[]> {
    const cfg = this.init.config;
    const w = this.inferenceWeights().weights;
    const store = this.devicePrefixes;
    const results: Prefilled<PagedKvSequence>[] = new Array(prompts.length);
    const continued: { index: number; seq: PagedKvSequence; reusedTokens: number }[] = [];
    const taken = prompts.map((prompt) => store?.take(prompt) ?? null);
    taken.forEach((seq, index) => seq && continued.push({ index, seq, reusedTokens: seq.length }));
    const uncached = prompts.map((_, i) => i).filter((i) => !taken[i]);
    try {
      const grouped = new Set<number>();
      for (const group of sharedPrefixGroups(uncached.map((i) => prompts[i]))) {
        const members = group.members.map((k) => uncached[k]);
        const length = group.length - (group.length % PAGE_SLOTS); // shared in whole pages (≥ MIN_REUSED_TOKENS = one page)
        const [prefix] = await prefillPaged(cfg, w, pool, [prompts[members[0]].slice(0, length)], deviceSamplingRuns() ? [UNREAD_END] : null);
        // The first member pays for the shared prefix; the others reuse it.
        members.forEach((index, k) => {
          grouped.add(index);
          continued.push({ index, seq: pool.share(prefix.cache, length), reusedTokens: k === 0 ? 0 : length });
        });
        if (store) store.put(prefix.cache);
        else pool.release(prefix.cache);
      }
      const fresh = uncached.filter((i) => !grouped.has(i));
      if (fresh.length > 0) {
        const ends = await prefillPaged(cfg, w, pool, fresh.map((i) => prompts[i]), picks && fresh.map((i) => picks[i]));
        ends.forEach((r, k) => (results[fresh[k]] = r));
      }
      if (continued.length > 0) {
        const seqs = continued.map((c) => c.seq);
        const rests = continued.map((c) => prompts[c.index].slice(c.seq.length));
        if (picks) {
          const tokens = await extendPagedSampled(cfg, w, seqs, rests, continued.map((c) => picks[c.index]));
          continued.forEach(({ index, seq, reusedTokens }, k) => (results[index] = { cache: seq, logits: new Float32Array(0), token: tokens[k], reusedTokens }));
        } else {
          const logits = await extendPaged(cfg, w, seqs, rests);
          const v = cfg.vocab_size;
          continued.forEach(({ index, seq, reusedTokens }, k) => (results[index] = { cache: seq, logits: logits.slice(k * v, (k + 1) * v), reusedTokens }));
        }
      }
    } catch (err) {
      const holding = new Set([...continued.map((c) => c.seq), ...results.filter((r) => r !== undefined).map((r) => r.cache)]);
      for (const seq of holding) pool.release(seq);
      throw err;
    }
    return results;
  }

  /** Fused (and LoRA-merged) weights for sampling, rebuilt after every weight change. */
  private inferenceWeights(): InferenceWeights {
    if (!this.inference) {
      const merged = this.lora ? mergedParams(this.params, this.lora) : null;
      const p = merged ?? this.params;
      // tidy keeps the tensors fuseWeights returns and frees its intermediates; params passed through stay as they are.
      const weights = tf.tidy(() => fuseWeights(this.init.config, p) as unknown as tf.TensorContainer) as unknown as ModelWeights;
      // Host weights serve model.ts's decodeStep/extendStep only (reading them needs dataSync).
      const onHost = readsSyncOnActiveBackend();
      this.inference = { weights, host: onHost ? decodeHostWeights(this.init.config, p) : null, device: onHost ? null : deviceDecodeWeights(this.init.config, p), merged };
    }
    return this.inference;
  }

  private dropInferenceWeights(): void {
    this.prefixes.clear(); // computed by the weights that are going away
    this.devicePrefixes?.clear();
    if (!this.inference) return;
    const owned = new Set(Object.values(this.params));
    const { weights, host, device, merged } = this.inference;
    if (host) disposeDecodeHostWeights(host);
    if (device) disposeDeviceDecodeWeights(device);
    const all = [weights.embed, weights.norm, weights.head, ...weights.layers.flatMap((l) => [l.inputNorm, l.q, l.k, l.v, l.qBias, l.kBias, l.vBias, l.qNorm, l.kNorm, l.o, l.postNorm, l.gate, l.up, l.down])];
    const mergedSet = new Set(merged ? Object.values(merged) : []);
    for (const t of new Set(all)) if (t && !owned.has(t) && !mergedSet.has(t)) t.dispose();
    if (merged) for (const t of Object.values(merged)) t.dispose();
    this.inference = null;
  }

  private assertOpen(): void {
    if (this.closed) throw new EngineClosedError('the engine is closed');
  }

  async generate(req: GenerateRequest, onToken?: (token: GeneratedToken) => void, signal?: AbortSignal): Promise<GenerateResult> {
    this.assertOpen();
    return this.batcher.generate(req, onToken, signal);
  }

  async trainStep(samples: TrainSample[], options: Partial<TrainOptions> = {}): Promise<TrainMetrics> {
    this.assertOpen();
    const opts = { ...DEFAULT_TRAIN_OPTIONS, ...options };
    return this.batcher.exclusive(async () => {
      this.optimizer ??= new AdamW(this.trainable);
      const metrics = await trainStep(
        { cfg: this.init.config, params: this.params, lora: this.lora, trainable: this.trainable, optimizer: this.optimizer, reference: this.reference, lossScaler: this.lossScaler },
        samples,
        opts,
        this.info.policyVersion + 1,
      );
      this.info.policyVersion += 1;
      this.dropInferenceWeights();
      return metrics;
    });
  }

  async logprobs(sequences: number[][]): Promise<number[][]> {
    this.assertOpen();
    if (sequences.length === 0) return [];
    const p = this.lora ? this.inferenceWeightsParams() : this.params;
    return sequenceLogprobs(this.init.config, p, sequences, SCORING_TOKEN_BUDGET);
  }

  /** Effective params for scoring (merged LoRA). */
  private inferenceWeightsParams(): Params {
    this.inferenceWeights();
    return this.inference!.merged ?? this.params;
  }

  async snapshotReference(): Promise<void> {
    this.assertOpen();
    if (this.reference) for (const t of Object.values(this.reference)) t.dispose();
    this.reference = tf.tidy(() => {
      const eff = effectiveParams(this.params, this.lora);
      const out: Params = {};
      for (const [name, t] of Object.entries(eff)) out[name] = tf.keep(t.clone());
      return out;
    });
  }

  /** Full fine-tuning: every base weight (HF names and layout). With LoRA: the adapters in PEFT naming. */
  async getWeights(): Promise<NamedTensors> {
    this.assertOpen();
    return this.lora ? await loraToPeft(this.lora) : await fromParams(this.params);
  }

  /** Base weights merged with the LoRA adapters (HF layout); the base weights when LoRA is off. */
  async mergedWeights(): Promise<NamedTensors> {
    this.assertOpen();
    if (!this.lora) return fromParams(this.params);
    const merged = mergedParams(this.params, this.lora);
    try {
      return await fromParams(merged);
    } finally {
      for (const t of Object.values(merged)) t.dispose();
    }
  }

  async setWeights(weights: NamedTensors, policyVersion: number): Promise<void> {
    this.assertOpen();
    await this.batcher.exclusive(() => {
      if (this.lora) {
        loadPeftIntoLora(this.lora, weights);
      } else {
        // Check everything before changing anything.
        for (const [name, t] of Object.entries(weights)) {
          const current = this.params[name];
          if (!current) throw new MissingTensorError(name);
          const expected = isLinearWeight(name) ? [current.shape[1] as number, current.shape[0] as number] : current.shape;
          if (t.shape.length !== expected.length || t.shape.some((s, i) => s !== expected[i]) || t.data.length !== current.size) throw new TensorShapeError(name, expected, t.shape);
        }
        for (const [name, t] of Object.entries(weights)) {
          const internal = toInternal(name, t);
          tf.tidy(() => (this.params[name] as tf.Variable).assign(tf.tensor(internal.data, internal.shape)));
        }
      }
      this.info.policyVersion = policyVersion;
      this.dropInferenceWeights();
    });
  }

  async getOptimizerState(): Promise<OptimizerState> {
    this.assertOpen();
    // Inside exclusive: a step under way finishes first, so the state read is that of a whole number of steps.
    return this.batcher.exclusive(async () => {
      const state: OptimizerState = { step: 0, m: {}, v: {} };
      if (!this.optimizer) return state;
      const { step, m, v } = await this.optimizer.exportState();
      state.step = step;
      this.trainable.forEach((t, i) => {
        const name = this.trainableNames[i];
        state.m[name] = { shape: [...t.shape], data: m[i] };
        state.v[name] = { shape: [...t.shape], data: v[i] };
      });
      return state;
    });
  }

  async setOptimizerState(state: OptimizerState): Promise<void> {
    this.assertOpen();
    await this.batcher.exclusive(() => {
      const names = Object.keys(state.m);
      if (state.step === 0 && names.length === 0 && Object.keys(state.v).length === 0) {
        // A fresh optimizer, as before the first step.
        this.optimizer?.dispose();
        this.optimizer = null;
        return;
      }
      const moments = (which: NamedTensors) =>
        this.trainable.map((t, i) => {
          const name = this.trainableNames[i];
          const moment = which[name];
          if (!moment) throw new OptimizerStateError(`no optimizer moment for ${name}`);
          if (moment.shape.length !== t.shape.length || moment.shape.some((d, k) => d !== t.shape[k])) throw new OptimizerStateError(`${name}: moment of shape [${moment.shape.join(', ')}] for a variable of shape [${t.shape.join(', ')}]`);
          return moment.data;
        });
      if (names.length !== this.trainable.length) throw new OptimizerStateError(`optimizer state for ${names.length} variables, the engine trains ${this.trainable.length}`);
      const m = moments(state.m);
      const v = moments(state.v);
      this.optimizer ??= new AdamW(this.trainable);
      this.optimizer.importState({ step: state.step, m, v });
    });
  }

  async save(dir: string): Promise<{ files: string[] }> {
    this.assertOpen();
    const writer = this.init.writer;
    if (!writer) throw new SaveNotSupportedError('this engine was created without a checkpoint writer');
    if (this.lora) return writer.writeAdapter(dir, peftConfigFromLora(this.lora.config, { base_model_name_or_path: this.init.name }), await loraToPeft(this.lora));
    return writer.writeModel(dir, this.init.config, await fromParams(this.params));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.batcher.rejectAll(new EngineClosedError('the engine was closed'));
    this.dropInferenceWeights();
    this.kvPool?.dispose();
    this.optimizer?.dispose();
    for (const t of [...Object.values(this.params), ...(this.reference ? Object.values(this.reference) : []), ...(this.lora ? loraVariables(this.lora) : [])]) t.dispose();
    if (this.lossScaler) releaseStaleF16Copies(); // the weights' f16 copies (mixed precision) go with them
  }
}

/** Select the backend (once per thread) and build the engine on this thread. */
export async function createEngineFromWeights(init: EngineInit): Promise<LocalEngine> {
  // The engine reads asynchronously where the backend needs it (WebGPU under Node), so such backends qualify.
  const selected = await selectBackend(init.backend, { syncReads: false, modelParameters: countParameters(init.config) });
  // On webgpu, whether the fused norm/SwiGLU products pay is measured on this model's shapes (once per shape).
  const fused = selected.name === 'webgpu' ? await (await import('./webgpu/fused-calibration.ts')).calibrateFusedKernels(init.config) : null;
  const backend = fused ? { ...selected, kernels: [selected.kernels, fused].filter(Boolean).join('; ') } : selected;
  return new LocalEngine(init, backend, await choosePrecision(init.precision ?? 'f32', backend));
}
