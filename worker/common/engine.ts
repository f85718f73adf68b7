/**
 * The trainer engine's contract: what a swarm server asks of one hosted model.
 *
 * The engine runs in a worker thread (worker/node/engine-client.ts is the caller's side). It speaks token ids only:
 * chat templates and tokenizers live in worker/tokenizer and are used by the caller on its own thread.
 * It knows nothing about episodes, networks or storage.
 *
 * Token/position convention for training samples: `tokens[t]` is predicted from `tokens[0..t-1]`;
 * `lossMask[t] = 1` marks a token the policy generated, `oldLogprobs[t]` is its logprob when it was sampled and
 * `advantages[t]` its advantage. Position 0 always has mask 0. All four arrays have the same length.
 */

/** Backends, best first. */
export type BackendName = 'tensorflow-gpu' | 'webgpu' | 'tensorflow' | 'wasm' | 'cpu';

export interface BackendReport {
  name: BackendName;
  /** Why this one was chosen (e.g. "best that loaded", "forced by AGENTJET_BACKEND"). */
  reason: string;
  /** The better backends that were passed over, and why (not installed, no adapter, failed self-check …). */
  passedOver: { name: BackendName; reason: string }[];
  /** Numerics self-check against the cpu backend, run when the backend is first selected. */
  selfCheck: { ok: boolean; maxAbsError: number };
  /** When the choice between WebGPU and a CPU backend was measured on the model (worker/backend-probe.ts). */
  probe?: BackendProbe[];
  /** WebGPU: which of our kernels and tfjs's were measured faster on the device, and by how much. */
  kernels?: string;
}

/** One backend's measured cost on the model being loaded, per token of an RL step (decode one, train one). */
export interface BackendProbe {
  name: BackendName;
  decodeMsPerToken: number;
  trainMsPerToken: number;
  msPerToken: number;
  /** Sum of the probe's logits (constant weights), compared across backends. */
  logitSum: number;
  /** False when the backend ran out of the probe's time budget and its cost was extrapolated from less. */
  complete: boolean;
}

/** `builtin:tiny` (the embedded default) or a Hugging Face model folder on disk. */
export type ModelSource = { kind: 'builtin'; name: string } | { kind: 'hf'; path: string };

/** Hugging Face `config.json` fields the decoder understands (Llama / Qwen2 / Qwen3 family). */
export interface DecoderConfig {
  model_type: string;
  vocab_size: number;
  hidden_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  intermediate_size: number;
  max_position_embeddings: number;
  rope_theta: number;
  rms_norm_eps: number;
  tie_word_embeddings: boolean;
  /** Qwen3 normalises q and k per head before RoPE. */
  qk_norm: boolean;
  /** Qwen2 has biases on q/k/v projections. */
  attention_bias: boolean;
}

export interface LoraConfig {
  rank: number;
  alpha: number;
  /** HF module names, e.g. ["q_proj", "v_proj"]. */
  targetModules: string[];
  dropout?: number;
}

export interface ModelInfo {
  name: string;
  config: DecoderConfig;
  paramCount: number;
  trainableParamCount: number;
  policyVersion: number;
  lora: LoraConfig | null;
  backend: BackendReport;
  /** How training runs (absent: f32, engines made before mixed precision existed). */
  precision?: PrecisionReport;
}

export interface SamplingParams {
  maxTokens: number;
  /** 0 means greedy. */
  temperature: number;
  topP: number;
  /** 0 means no top-k cut. */
  topK: number;
  /** Same seed and inputs ⇒ same tokens. */
  seed?: number;
  stopTokenIds: number[];
  stopStrings: string[];
  /** How many alternatives to report per token (0–20). */
  topLogprobs: number;
}

export interface GenerateRequest {
  promptIds: number[];
  sampling: SamplingParams;
}

export interface TokenLogprob {
  id: number;
  logprob: number;
}

/**
 * `logprob` is log_softmax(logits / T)[id] over the full vocabulary, T being the sampling temperature (T = 1 when
 * greedy); top-k / top-p truncation is not reflected. It is what the trainer computes at `TrainOptions.temperature`
 * (default 1): sample at temperature 1, or train at the sampling temperature, for exact PPO ratios.
 */
export interface GeneratedToken extends TokenLogprob {
  /** Alternatives of the sampled distribution, best first (when topLogprobs > 0). */
  top?: TokenLogprob[];
}

export type FinishReason = 'stop' | 'length' | 'cancelled';

export interface GenerateResult {
  tokens: GeneratedToken[];
  finishReason: FinishReason;
  /** The stop string that ended generation, if any (its tokens are included in `tokens`). */
  stopString?: string;
  /** The policy version whose weights produced every token of this result. */
  policyVersion: number;
  timings: { queuedMs: number; prefillMs: number; decodeMs: number };
  /** Prompt tokens whose keys and values came from the prefix cache instead of being recomputed. */
  cachedPromptTokens?: number;
  /**
   * Times the request was taken out of the running batch because the device's KV cache had no room for it, and
   * resumed by recomputing its prompt and tokens (same tokens; only the wait grows). Absent when never.
   */
  preemptions?: number;
}

export type TrainPacking = 'tree' | 'rows';

export interface TrainSample {
  tokens: number[];
  lossMask: number[];
  advantages: number[];
  oldLogprobs: number[];
}

/**
 * The policy losses (worker/losses.ts): `ppo` — PPO-clip against the logprobs recorded at sampling; `decoupled-ppo`
 * — PPO-clip against the weights before the update (recomputed), weighted by the proximal ÷ behaviour importance
 * ratio, for episodes sampled by older weights (asynchronous training); `truncated-is` — the policy gradient
 * weighted by the behaviour importance ratio truncated at `importanceCap`, no clipping; `sft` — supervised NLL.
 */
export type TrainLoss = 'ppo' | 'decoupled-ppo' | 'truncated-is' | 'sft';

export interface TrainOptions {
  loss: TrainLoss;
  /** PPO clip range: ratio is clipped to [1 - clipLow, 1 + clipHigh]. */
  clipLow: number;
  clipHigh: number;
  /**
   * Upper bound of the importance weight π/π_behaviour in `decoupled-ppo` (the proximal ÷ behaviour weight) and
   * `truncated-is`; default 2. Bounds the variance that stale episodes bring.
   */
  importanceCap?: number;
  /** Weight of the k3 KL estimate against the frozen reference; 0 disables it. */
  klCoef: number;
  /** Weight of an entropy bonus (subtracted from the token loss, so exploration is rewarded); default 0, off. */
  entropyCoef?: number;
  /** token-sum: sum over tokens / `lossDivisor`; token-mean: mean over all masked tokens in the batch. */
  normalization: 'token-sum' | 'token-mean';
  /**
   * The constant the token-sum loss is divided by (ignored by token-mean). The training loop passes the number of
   * episodes in the batch, so merged and naive packings of the same episodes give identical updates. Default: the
   * number of samples (backwards compatible).
   */
  lossDivisor?: number;
  /** Micro-batches are packed up to this many tokens; gradients accumulate across them. */
  microBatchTokens: number;
  /**
   * How a micro-batch is laid out: `tree` (default) — the samples' prefix tree as one sequence, a shared prefix
   * computed once, each token attending to its ancestors; `rows` — one right-padded row per sample. Same loss and
   * gradients either way (worker/prefix-tree.ts).
   */
  packing?: TrainPacking;
  learningRate: number;
  weightDecay: number;
  maxGradNorm: number;
  /** Logits are divided by this before log-softmax in training (match the sampling temperature). Default 1. */
  temperature?: number;
  /** Learning-rate schedule over optimizer updates (a step makes `epochs` × `miniBatches` of them); default constant. */
  schedule?: LrSchedule;
  /**
   * Optimizer updates per step: the step's samples are split into this many consecutive mini-batches, one update
   * each (verl's PPO mini-batches); default 1. The policy version still advances once per step. Every update's
   * ratio is taken against where the step began: the behaviour logprobs, or with `decoupled-ppo` the weights before
   * the first update (a copy held for the step; with LoRA, of the adapters). Each mini-batch carries its share of
   * `lossDivisor`.
   */
  miniBatches?: number;
  /** Passes over the step's mini-batches (PPO epochs; TRL's num_iterations); default 1. */
  epochs?: number;
}

/** Learning rate over optimizer steps: constant, or linear warmup then cosine decay to learningRate·minRatio. */
export type LrSchedule = { kind: 'constant' } | { kind: 'warmup-cosine'; warmupSteps: number; totalSteps: number; minRatio: number };

export interface TrainMetrics {
  loss: number;
  clipFraction: number;
  kl: number;
  entropy: number;
  gradNorm: number;
  tokens: number;
  trainedTokens: number;
  microBatches: number;
  /** Optimizer updates the step made (TrainOptions epochs × miniBatches), when more than one. */
  updates?: number;
  /**
   * Tokens the forward passes computed: a prefix shared in a micro-batch's tree once, a trunk shared by several
   * micro-batches once per step, padded rows in full. The engine
   * always reports it and `packing`; steps recorded before tree packing existed have neither.
   */
  computedTokens?: number;
  packing?: TrainPacking;
  timeMs: number;
  policyVersion: number;
  /** 'mixed': f16 products, f32 master weights and optimizer (EngineInit.precision, worker/precision.ts). */
  precision?: TrainPrecision;
  /** Mixed precision: the loss scale this step used (worker/loss-scale.ts). */
  lossScale?: number;
  /** Mixed precision: the step's gradients overflowed, so the weights and optimizer were left as they were. */
  skippedStep?: boolean;
}

/** How the engine trains: 'f32' throughout, or 'mixed' (f16 products where the device allows, else f32). */
export type TrainPrecision = 'f32' | 'mixed';

/** The precision the engine trains in, and why (a request for 'mixed' may fall back to 'f32'). */
export interface PrecisionReport {
  requested: TrainPrecision;
  active: TrainPrecision;
  reason: string;
  /** Mixed precision's numerics self-check against the cpu backend, when it ran (worker/precision.ts). */
  selfCheck?: { ok: boolean; logitsError: number; lossError: number; gradError: number };
}

/** Named tensors in Hugging Face naming, e.g. "model.layers.0.self_attn.q_proj.weight". */
export interface NamedTensor {
  shape: number[];
  data: Float32Array;
}
export type NamedTensors = Record<string, NamedTensor>;

/**
 * The optimizer's state (AdamW): its step count, which is also the learning-rate schedule's position, and the first
 * and second moments of every trainable variable, keyed by the variable's name (full fine-tuning: the HF parameter
 * name; LoRA: `<base weight>.lora_A` / `.lora_B`) and held in the engine's internal layout (Linear weights as
 * [in, out]): it is only ever given back to an engine of the same model and LoRA config. Before the first step the
 * step count is 0 and there are no moments.
 */
export interface OptimizerState {
  step: number;
  m: NamedTensors;
  v: NamedTensors;
}

export interface TrainerEngine {
  readonly info: ModelInfo;
  generate(req: GenerateRequest, onToken?: (token: GeneratedToken) => void, signal?: AbortSignal): Promise<GenerateResult>;
  /** One training step over all samples (micro-batched and accumulated; TrainOptions miniBatches × epochs optimizer updates, one by default); bumps the policy version once. */
  trainStep(samples: TrainSample[], options?: Partial<TrainOptions>): Promise<TrainMetrics>;
  /** Per-token logprobs of each sequence under the current policy (index t: logprob of tokens[t]; index 0 is 0). */
  logprobs(sequences: number[][]): Promise<number[][]>;
  /** Freeze the current weights as the KL reference. */
  snapshotReference(): Promise<void>;
  getWeights(): Promise<NamedTensors>;
  setWeights(weights: NamedTensors, policyVersion: number): Promise<void>;
  /** The optimizer's state, so that a resumed run's next step is the step the stopped run would have taken. */
  getOptimizerState(): Promise<OptimizerState>;
  /** Restores getOptimizerState's answer (step 0 and no moments: a fresh optimizer); OptimizerStateError if it does not fit. */
  setOptimizerState(state: OptimizerState): Promise<void>;
  /** Save config.json + model.safetensors (or a PEFT adapter when LoRA is on) into `dir`. */
  save(dir: string): Promise<{ files: string[] }>;
  close(): Promise<void>;
}
