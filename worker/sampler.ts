/**
 * Token sampling and continuous batching.
 *
 * `sampleToken` turns one row of logits into a token: greedy (temperature 0) or temperature / top-k / top-p
 * sampling from a seeded PRNG, so the same seed and inputs give the same tokens.
 *
 * Reported logprob (what RL trains against): log_softmax(logits / T) of the sampled token over the *full*
 * vocabulary, where T is the sampling temperature (T = 1 for greedy). Top-k / top-p truncation is not reflected:
 * the logprob is the policy's, not the truncated sampler's. The trainer computes the same quantity at
 * `TrainOptions.temperature` (default 1), so sample at temperature 1 (or pass the same temperature) for exact
 * PPO ratios. Alternatives (`top`) come from the same distribution, best first.
 *
 * `ContinuousBatcher` runs every active request in one shared decode step: a request is prefilled and joins the
 * running batch between two steps, and leaves it as soon as it stops, without waiting for the others. Where the
 * runtime samples on the device (decodeSampled: webgpu), a step reads back each row's token and logprob instead of
 * its logits, with the draws taken from the same PRNGs in the same order (devicePick), and so does a prefill for the
 * first tokens; a request that wants top logprobs has its row's logits read as well in a step (its alternatives are
 * taken here), and a prefill with such a request reads the logits and samples here.
 */
import type { FinishReason, GeneratedToken, GenerateRequest, GenerateResult, SamplingParams, TokenLogprob } from './common/engine.ts';
import { ContextLengthError, seededRandom } from './model.ts';
import { StopStringDetector, StreamDecoder } from './tokenizer/stream-decoder.ts';
import type { Tokenizer } from './tokenizer/types.ts';
import type { DeviceSampling } from './webgpu/sample.ts';

export class InvalidSamplingError extends Error {
  override name = 'InvalidSamplingError';
}

export function validateSampling(s: SamplingParams, vocabSize: number): void {
  const bad = (what: string) => {
    throw new InvalidSamplingError(`invalid sampling parameters: ${what}`);
  };
  if (!Number.isInteger(s.maxTokens) || s.maxTokens < 1) bad(`maxTokens must be a positive integer (got ${s.maxTokens})`);
  if (!(s.temperature >= 0)) bad(`temperature must be ≥ 0 (got ${s.temperature})`);
  if (!(s.topP > 0 && s.topP <= 1)) bad(`topP must be in (0, 1] (got ${s.topP})`);
  if (!Number.isInteger(s.topK) || s.topK < 0) bad(`topK must be a non-negative integer (got ${s.topK})`);
  if (!Number.isInteger(s.topLogprobs) || s.topLogprobs < 0 || s.topLogprobs > 20) bad(`topLogprobs must be 0–20 (got ${s.topLogprobs})`);
  if (s.stopTokenIds.some((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize)) bad('stopTokenIds must be token ids of the vocabulary');
}

/** The `n` best entries of `logp`, best first (a small insertion list: n ≤ 20). */
function topEntries(logp: ArrayLike<number>, n: number): TokenLogprob[] {
  const best: TokenLogprob[] = [];
  for (let i = 0; i < logp.length; i++) {
    const v = logp[i];
    if (best.length === n && v <= best[n - 1].logprob) continue;
    let j = best.length < n ? best.length : n - 1;
    if (best.length < n) best.push({ id: i, logprob: v });
    while (j > 0 && best[j - 1].logprob < v) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = { id: i, logprob: v };
  }
  return best;
}

/** Width in nats of the log-probability buckets nucleusCandidates sorts within, and how many (below: one more). */
const NUCLEUS_BUCKET_NATS = 0.5;
const NUCLEUS_BUCKETS = 64;

/**
 * Every token that can belong to the top-p nucleus, best first (ties in id order, as a full stable sort gives). A
 * vocabulary of 150k tokens is not sorted per token: probability mass is summed per log-probability bucket, from the
 * most probable bucket down to the one where it reaches `topP`, and only the tokens of those buckets are sorted.
 */
function nucleusCandidates(logp: Float64Array, topP: number): number[] {
  const bucketOf = (lp: number) => Math.min(NUCLEUS_BUCKETS, Math.floor(-lp / NUCLEUS_BUCKET_NATS));
  const mass = new Float64Array(NUCLEUS_BUCKETS + 1);
  for (let i = 0; i < logp.length; i++) mass[bucketOf(logp[i])] += Math.exp(logp[i]);
  let last = NUCLEUS_BUCKETS;
  let total = 0;
  for (let b = 0; b <= NUCLEUS_BUCKETS; b++) {
    total += mass[b];
    if (total >= topP) {
      last = b;
      break;
    }
  }
  const candidates: number[] = [];
  for (let i = 0; i < logp.length; i++) if (bucketOf(logp[i]) <= last) candidates.push(i);
  return candidates.sort((a, b) => logp[b] - logp[a]);
}

/** Scratch for log-probabilities, reused across calls (sampling is synchronous): no allocation per token. */
let scratch = new Float64Array(0);

/**
 * Whether `s` picks greedily (and so takes no draw). A temperature so small that 1/T overflows (a denormal) is
 * greedy in effect; scaling by Infinity would make every logit NaN and the pick undefined.
 */
function isGreedy(s: SamplingParams): boolean {
  return s.temperature <= 0 || !Number.isFinite(1 / s.temperature);
}

/**
 * A request's next token as the device sampler takes it (webgpu/sample.ts): its parameters and the draw that
 * sampleToken would take from `rand` now (none when greedy), so that the request's stream of draws is the same
 * whichever samples.
 */
export function devicePick(s: SamplingParams, rand: () => number): DeviceSampling {
  const greedy = isGreedy(s);
  return { invTemperature: greedy ? 0 : 1 / s.temperature, topK: s.topK, topP: s.topP, draw: greedy ? 0 : rand() };
}

/**
 * log_softmax(logits / T) of a row [V] (T = 1 for greedy) into the shared scratch, and the row's first largest
 * logit: what a pick and the reported logprobs are taken from.
 */
function rowLogprobs(logits: Float32Array, s: SamplingParams): { logp: Float64Array; best: number } {
  const vocab = logits.length;
  const invT = isGreedy(s) ? 1 : 1 / s.temperature;
  // One pass for the max (and the greedy pick), one for exp-sum; logp = z − lse with z = (logit − max) / T.
  let max = -Infinity;
  let best = 0;
  for (let i = 0; i < vocab; i++) {
    if (logits[i] > max) {
      max = logits[i];
      best = i;
    }
  }
  if (scratch.length < vocab) scratch = new Float64Array(vocab);
  const logp = scratch.subarray(0, vocab);
  let sum = 0;
  for (let i = 0; i < vocab; i++) {
    const z = (logits[i] - max) * invT;
    logp[i] = z;
    sum += Math.exp(z);
  }
  const lse = Math.log(sum);
  for (let i = 0; i < vocab; i++) logp[i] -= lse;
  return { logp, best };
}

/** The `s.topLogprobs` most likely tokens of a row of logits [V], best first, as sampleToken reports them. */
export function topLogprobs(logits: Float32Array, s: SamplingParams): TokenLogprob[] {
  return topEntries(rowLogprobs(logits, s).logp, s.topLogprobs);
}

/** Sample one token from a row of logits [V]. `rand` is the request's seeded PRNG (one draw per sampled token). */
export function sampleToken(logits: Float32Array, s: SamplingParams, rand: () => number): GeneratedToken {
  const vocab = logits.length;
  const greedy = isGreedy(s);
  const { logp, best } = rowLogprobs(logits, s);
  let id = best;
  if (!greedy) {
    // Candidates, best first when a cut is needed (top-k, then top-p over what remains).
    let candidates: number[] | null = null;
    if (s.topK > 0 && s.topK < vocab) candidates = topEntries(logp, s.topK).map((e) => e.id);
    if (s.topP < 1) {
      candidates ??= nucleusCandidates(logp, s.topP);
      let mass = 0;
      let keep = 0;
      while (keep < candidates.length && mass < s.topP) mass += Math.exp(logp[candidates[keep++]]);
      candidates = candidates.slice(0, Math.max(1, keep));
    }
    if (candidates) {
      let total = 0;
      for (const c of candidates) total += Math.exp(logp[c]);
      let u = rand() * total;
      id = candidates[candidates.length - 1];
      for (const c of candidates) {
        u -= Math.exp(logp[c]);
        if (u <= 0) {
          id = c;
          break;
        }
      }
    } else {
      let u = rand();
      id = vocab - 1;
      for (let i = 0; i < vocab; i++) {
        u -= Math.exp(logp[i]);
        if (u <= 0) {
          id = i;
          break;
        }
      }
    }
  }
  const token: GeneratedToken = { id, logprob: logp[id] };
  if (s.topLogprobs > 0) token.top = topEntries(logp, s.topLogprobs);
  return token;
}

/** A sequence's KV cache, whatever holds it (host arrays on wasm/cpu, device tensors on WebGPU). */
export interface DecodeCache {
  /** Positions cached so far. */
  readonly length: number;
}

/** What a step sampled on the device reads back: each row's token, and the logits [m, V] of the rows asked for, in their order. */
export interface SampledStep {
  tokens: GeneratedToken[];
  logits: Float32Array;
}

export interface Prefilled<C extends DecodeCache> {
  cache: C;
  /** The prompt's last logits [V]; empty where `token` was sampled on the device. */
  logits: Float32Array;
  /** The first token, where the prefill was handed a pick and sampled it on the device. */
  token?: GeneratedToken;
  reusedTokens?: number;
}

/**
 * What the batcher needs from the model. prefill and decode may answer synchronously (wasm/cpu: the hot loop takes
 * no extra event-loop turn) or with a promise (backends that read results asynchronously).
 */
export interface DecoderRuntime<C extends DecodeCache = DecodeCache> {
  readonly contextLength: number;
  readonly vocabSize: number;
  /**
   * Run the prompts (in one batch where it can), return per prompt its cache, the last position's logits [V] and
   * how many of its tokens a prefix cache supplied. With `picks` (only handed to a runtime with decodeSampled), each
   * prompt's first token is sampled on the device and returned instead of its logits.
   */
  prefill(prompts: number[][], picks?: DeviceSampling[]): Prefilled<C>[] | Promise<Prefilled<C>[]>;
  /** Append `tokens[i]` to `caches[i]` for all i in one batched step; logits [n, V] row-major. */
  decode(caches: C[], tokens: number[]): Float32Array | Promise<Float32Array>;
  /**
   * decode that samples on the device as well: each row's token and logprob (sampleToken's, without `top`) and the
   * logits of `logitRows` only (the rows whose requests want top logprobs) are all it reads back. Absent where the
   * host samples.
   */
  decodeSampled?(caches: C[], tokens: number[], picks: DeviceSampling[], logitRows: number[]): Promise<SampledStep>;
  /** Free a cache the batcher no longer needs (device memory); absent where the garbage collector suffices. */
  release?(cache: C): void;
  /**
   * Whether `err` says a prefill or a step found too little cache room before doing any work (a pool of fixed size:
   * the device's paged KV cache). The batcher then preempts instead of failing the batch. Absent where the cache
   * grows as needed.
   */
  isOutOfRoom?(err: unknown): boolean;
  policyVersion(): number;
}

interface Sequence {
  req: GenerateRequest;
  onToken?: (token: GeneratedToken) => void;
  signal?: AbortSignal;
  resolve: (r: GenerateResult) => void;
  reject: (e: unknown) => void;
  enqueuedAt: number;
  queuedMs: number;
  prefillMs: number;
  reusedTokens: number;
  decodeStart: number;
  rand: () => number;
  /** Times this sequence was preempted. */
  preemptions: number;
  /**
   * The pick of the token the next prefill samples, drawn once: a prefill retried (one by one after a failed batch)
   * reuses it, and so does the resumption of a sequence preempted after its step had drawn it.
   */
  prefillPick: DeviceSampling | null;
  cache: DecodeCache | null;
  tokens: GeneratedToken[];
  stopIds: Set<number>;
  decoder: StreamDecoder | null;
  detector: StopStringDetector | null;
  policyVersion: number;
}

/** Upper bound on sequences in one decode step (memory for logits and caches stays bounded). */
const MAX_BATCH = 32;
/** Padded prompt tokens (rows × longest prompt) prefilled in one forward. */
const PREFILL_TOKEN_BUDGET = 4096;

/** What a resumed sequence prefills: its prompt and every token it has generated (preemption by recomputation). */
function resumePrompt(seq: Sequence): number[] {
  return [...seq.req.promptIds, ...seq.tokens.map((t) => t.id)];
}

export class ContinuousBatcher {
  private readonly queue: Sequence[] = [];
  private readonly active: Sequence[] = [];
  /**
   * Running sequences taken out of the batch when the cache had no room for their next position (vLLM's preemption
   * by recomputation): their caches are released, and they are prefilled again (prompt and tokens so far) before
   * anything new is admitted. Oldest first. They belong to the running batch: a weight update waits for them too.
   */
  private readonly preempted: Sequence[] = [];
  /** Set by a preemption or a prefill that found no room; cleared when a sequence finishes: admitting sooner would evict again at once. */
  private waitingForRoom = false;
  private looping = false;
  /** Set while a weight update waits for the running batch to drain; nothing new is admitted meanwhile. */
  private pausedBy: Promise<unknown> | null = null;
  private drained: (() => void) | null = null;
  /** Set by rejectAll: a prefill that was in flight then fails its requests with this error. */
  private closedBy: Error | null = null;

  constructor(
    private readonly runtime: DecoderRuntime<DecodeCache>,
    private readonly tokenizer: Tokenizer | null,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  /** How many requests are running, waiting and preempted. */
  get load(): { active: number; queued: number; preempted: number } {
    return { active: this.active.length, queued: this.queue.length, preempted: this.preempted.length };
  }

  generate(req: GenerateRequest, onToken?: (token: GeneratedToken) => void, signal?: AbortSignal): Promise<GenerateResult> {
    validateSampling(req.sampling, this.runtime.vocabSize);
    if (req.promptIds.length + 1 > this.runtime.contextLength) {
      return Promise.reject(new ContextLengthError(`prompt of ${req.promptIds.length} tokens leaves no room in the context of ${this.runtime.contextLength}`));
    }
    if (req.sampling.stopStrings.length > 0 && !this.tokenizer) {
      return Promise.reject(new InvalidSamplingError('stop strings need a tokenizer, and this engine has none'));
    }
    return new Promise<GenerateResult>((resolve, reject) => {
      const seed = req.sampling.seed ?? Math.floor(Math.random() * 2 ** 32);
      const wantsText = req.sampling.stopStrings.length > 0 && this.tokenizer;
      this.queue.push({
        req,
        onToken,
        signal,
        resolve,
        reject,
        enqueuedAt: performance.now(),
        queuedMs: 0,
        prefillMs: 0,
        reusedTokens: 0,
        decodeStart: 0,
        rand: seededRandom(seed),
        prefillPick: null,
        preemptions: 0,
        cache: null,
        tokens: [],
        stopIds: new Set(req.sampling.stopTokenIds),
        decoder: wantsText ? new StreamDecoder(this.tokenizer!) : null,
        detector: wantsText ? new StopStringDetector(req.sampling.stopStrings) : null,
        policyVersion: 0,
      });
      this.kick();
    });
  }

  /**
   * Run `fn` (a weight update) once the running batch has finished; requests arriving meanwhile wait and then run
   * on the new weights. So every result is produced by one policy version.
   */
  async exclusive<T>(fn: () => T | Promise<T>): Promise<T> {
    while (this.pausedBy) await this.pausedBy.catch(() => undefined);
    const run = (async () => {
      if (this.running()) await new Promise<void>((r) => (this.drained = r));
      return fn();
    })();
    this.pausedBy = run;
    try {
      return await run;
    } finally {
      this.pausedBy = null;
      this.kick();
    }
  }

  /** Fail every request (engine closing). */
  rejectAll(err: Error): void {
    this.closedBy = err;
    for (const seq of [...this.queue.splice(0), ...this.active.splice(0), ...this.preempted.splice(0)]) {
      this.releaseCache(seq);
      seq.reject(err);
    }
  }

  /** Sequences of the running batch: in a step, or preempted and waiting to resume. */
  private running(): boolean {
    return this.active.length > 0 || this.preempted.length > 0;
  }

  private releaseCache(seq: Sequence): void {
    if (seq.cache) this.runtime.release?.(seq.cache);
    seq.cache = null;
  }

  private kick(): void {
    if (this.looping) return;
    this.looping = true;
    setImmediate(() => void this.loop());
  }

  private async loop(): Promise<void> {
    try {
      while (this.running() || (this.queue.length > 0 && !this.pausedBy)) {
        await this.admit();
        if (this.active.length > 0) await this.step();
        if (!this.running() && this.drained) {
          this.drained();
          this.drained = null;
        }
        // Let messages (new requests, cancels) in between steps.
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.looping = false;
      if (!this.running() && this.drained) {
        this.drained();
        this.drained = null;
      }
    }
  }

  /**
   * Resume preempted sequences (one at a time, also while a weight update waits: they belong to the running batch),
   * then prefill waiting requests together (one forward per PREFILL_TOKEN_BUDGET) and sample their first token.
   * After a preemption nothing is admitted until a sequence finishes, unless nothing runs.
   */
  private async admit(): Promise<void> {
    if (this.waitingForRoom && this.active.length > 0) return;
    this.waitingForRoom = false;
    while (this.preempted.length > 0 && this.active.length < this.maxBatch && !this.waitingForRoom) {
      const seq = this.preempted.shift()!;
      if (seq.signal?.aborted) this.finish(seq, 'cancelled');
      else await this.prefillGroup([seq]);
    }
    if (this.pausedBy || this.preempted.length > 0) return;
    while (this.queue.length > 0 && this.active.length < this.maxBatch && !this.waitingForRoom) {
      const group: Sequence[] = [];
      let longest = 0;
      while (this.queue.length > 0 && this.active.length + group.length < this.maxBatch) {
        const next = this.queue[0];
        const width = Math.max(longest, next.req.promptIds.length);
        if (group.length > 0 && width * (group.length + 1) > PREFILL_TOKEN_BUDGET) break;
        this.queue.shift();
        next.queuedMs = performance.now() - next.enqueuedAt;
        if (next.signal?.aborted) {
          this.finish(next, 'cancelled');
          continue;
        }
        group.push(next);
        longest = width;
      }
      if (group.length > 0) await this.prefillGroup(group);
    }
  }

  private async prefillGroup(group: Sequence[]): Promise<void> {
    const start = performance.now();
    let results: Prefilled<DecodeCache>[];
    try {
      // A resumed sequence keeps the version it started on (a weight update waits for it).
      for (const seq of group) if (seq.tokens.length === 0) seq.policyVersion = this.runtime.policyVersion();
      const picks = this.samplesOnDevice(group) ? group.map((seq) => (seq.prefillPick ??= devicePick(seq.req.sampling, seq.rand))) : undefined;
      const answer = this.runtime.prefill(
        group.map((seq) => (seq.tokens.length > 0 ? resumePrompt(seq) : seq.req.promptIds)),
        picks,
      );
      results = answer instanceof Promise ? await answer : answer;
    } catch (err) {
      if (group.length > 1) {
        // One bad request must not fail the others: retry them one by one, so only the culprit is rejected.
        for (let i = 0; i < group.length; i++) {
          if (!this.waitingForRoom) await this.prefillGroup([group[i]]);
          else this.requeue(group.slice(i));
        }
      } else if (this.runtime.isOutOfRoom?.(err) && this.active.length > 0) {
        // Room comes back as running sequences finish: wait for that rather than fail.
        this.requeue(group);
      } else {
        group[0].reject(err);
      }
      return;
    }
    if (this.closedBy) {
      for (const r of results) this.runtime.release?.(r.cache);
      for (const seq of group) seq.reject(this.closedBy);
      return;
    }
    const prefillMs = performance.now() - start;
    group.forEach((seq, i) => {
      seq.cache = results[i].cache;
      seq.prefillMs += prefillMs;
      // What a resumption found cached is not the request's prompt: only the first prefill's counts.
      if (seq.tokens.length === 0) {
        seq.reusedTokens = results[i].reusedTokens ?? 0;
        seq.decodeStart = performance.now();
      }
      // A pick drawn already (a retried prefill, a preempted step's) is this token's draw, also when the host samples.
      const pick = seq.prefillPick;
      seq.prefillPick = null;
      const token = results[i].token ?? sampleToken(results[i].logits.subarray(0, this.runtime.vocabSize), seq.req.sampling, pick ? () => pick.draw : seq.rand);
      if (!this.accept(seq, token)) this.active.push(seq);
    });
  }

  /** Take `seq` out of the running batch (already out when the engine closed while its step ran). */
  private leaveBatch(seq: Sequence): void {
    const at = this.active.indexOf(seq);
    if (at >= 0) this.active.splice(at, 1);
  }

  /** Sequences whose prefill found no room, back to the head of their line in order; nothing more is admitted until room comes back. */
  private requeue(group: Sequence[]): void {
    this.waitingForRoom = true;
    for (const seq of [...group].reverse()) (seq.tokens.length > 0 ? this.preempted : this.queue).unshift(seq);
  }

  /** Take the youngest running sequence out of the batch to make room (its pick kept for its resumption). */
  private preempt(seq: Sequence, pick: DeviceSampling | null): void {
    this.leaveBatch(seq);
    this.releaseCache(seq);
    seq.prefillPick = pick;
    seq.preemptions++;
    // Preempted youngest first: unshifting keeps the oldest at the head.
    this.preempted.unshift(seq);
    this.waitingForRoom = true;
  }

  /**
   * One batched decode step over every active sequence. Where the cache has no room for every sequence's next
   * position, the youngest sequences are preempted until the rest fit; a sequence alone that does not fit fails.
   */
  private async step(): Promise<void> {
    for (let i = this.active.length - 1; i >= 0; i--) {
      if (this.active[i].signal?.aborted) this.finish(this.active.splice(i, 1)[0], 'cancelled');
    }
    if (this.active.length === 0) return;
    const batch = this.active.slice();
    // Drawn once: a step retried after a preemption must not draw again. Every row is sampled on the device where the
    // runtime can; a request that wants top logprobs has its row's logits read as well.
    const picks = this.runtime.decodeSampled ? batch.map((s) => devicePick(s.req.sampling, s.rand)) : null;
    let picked: GeneratedToken[] | null = null;
    let logits: Float32Array = new Float32Array(0);
    for (;;) {
      const caches = batch.map((s) => s.cache!);
      const last = batch.map((s) => s.tokens[s.tokens.length - 1].id);
      try {
        if (picks) {
          const logitRows = batch.flatMap((s, i) => (s.req.sampling.topLogprobs > 0 ? [i] : []));
          const step = await this.runtime.decodeSampled!(caches, last, picks, logitRows);
          const v = this.runtime.vocabSize;
          logitRows.forEach((row, k) => (step.tokens[row].top = topLogprobs(step.logits.subarray(k * v, (k + 1) * v), batch[row].req.sampling)));
          picked = step.tokens;
        } else {
          const answer = this.runtime.decode(caches, last);
          logits = answer instanceof Promise ? await answer : answer;
        }
        break;
      } catch (err) {
        if (batch.length > 1 && this.runtime.isOutOfRoom?.(err)) {
          this.preempt(batch.pop()!, picks?.pop() ?? null);
          continue;
        }
        for (const seq of batch) {
          this.leaveBatch(seq);
          this.releaseCache(seq);
          seq.reject(err);
        }
        return;
      }
    }
    const v = this.runtime.vocabSize;
    for (let i = 0; i < batch.length; i++) {
      const at = this.active.indexOf(batch[i]);
      if (at < 0) continue; // rejected while the step ran (engine closing)
      const token = picked ? picked[i] : sampleToken(logits.subarray(i * v, (i + 1) * v), batch[i].req.sampling, batch[i].rand);
      if (this.accept(batch[i], token)) this.active.splice(at, 1);
    }
  }

  /** Whether a prefill of these sequences samples their first tokens on the device: where the runtime can, unless one wants top logprobs. */
  private samplesOnDevice(seqs: Sequence[]): boolean {
    return this.runtime.decodeSampled !== undefined && seqs.every((s) => s.req.sampling.topLogprobs === 0);
  }

  /** Emit `token`; returns true when the sequence has finished. */
  private accept(seq: Sequence, token: GeneratedToken): boolean {
    const s = seq.req.sampling;
    seq.tokens.push(token);
    seq.onToken?.(token);
    if (seq.stopIds.has(token.id)) return this.finish(seq, 'stop');
    if (seq.decoder && seq.detector) {
      const match = seq.detector.push(seq.decoder.push(token.id));
      if (match) return this.finish(seq, 'stop', match.stopString);
    }
    if (seq.tokens.length >= s.maxTokens) return this.finish(seq, 'length');
    // Prompt + generated tokens never exceed the context (the next step would put this token at cache.length).
    if (seq.cache!.length + 1 >= this.runtime.contextLength) return this.finish(seq, 'length');
    return false;
  }

  private finish(seq: Sequence, finishReason: FinishReason, stopString?: string): true {
    this.waitingForRoom = false;
    const result: GenerateResult = {
      tokens: seq.tokens,
      finishReason,
      policyVersion: seq.policyVersion || this.runtime.policyVersion(),
      timings: { queuedMs: seq.queuedMs, prefillMs: seq.prefillMs, decodeMs: seq.decodeStart ? performance.now() - seq.decodeStart : 0 },
    };
    if (stopString !== undefined) result.stopString = stopString;
    if (seq.reusedTokens > 0) result.cachedPromptTokens = seq.reusedTokens;
    if (seq.preemptions > 0) result.preemptions = seq.preemptions;
    this.releaseCache(seq);
    seq.resolve(result);
    return true;
  }
}
