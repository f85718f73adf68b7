/**
 * The context tracker: per episode, an in-memory record of every LLM call exactly as the server tokenized it,
 * which renders the next prompt with splicing (render.ts), feeds the timeline merger, and hands each call to a
 * sink (the store) as soon as it completes, so nothing acknowledged lives only in memory.
 *
 * Gateway flow per call: `render()` → sample with `rendered.promptIds` → `record()` with the generated ids.
 */
import { createHash } from 'node:crypto';
import type { ChatMessage, ChatTemplate, Tokenizer, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { toMergeCalls, type CallRecord, type CallTimings } from '../../common/timeline/call.ts';
import { mergeTimelines, type MergeMode, type MergeResult } from '../../common/timeline/merge.ts';
import { PieceCache, renderPrompt, type RenderedPrompt } from './render.ts';

export class UntrackedEpisodeError extends Error {
  override name = 'UntrackedEpisodeError';
  constructor(readonly episodeId: string) {
    super(`episode ${episodeId} is not tracked (never begun, or already ended)`);
  }
}

export class EpisodeAlreadyTrackedError extends Error {
  override name = 'EpisodeAlreadyTrackedError';
  constructor(readonly episodeId: string) {
    super(`episode ${episodeId} is already tracked`);
  }
}

export class CallRecordError extends Error {
  override name = 'CallRecordError';
}

/** Where completed calls go (the store's insertCall, bound to a database). */
export type CallSink = (episodeId: string, call: CallRecord) => void;

export interface RenderOptions {
  tools?: ToolSpec[];
  enableThinking?: boolean;
  templateKwargs?: Readonly<Record<string, unknown>>;
}

export interface RecordCallInput {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  /** What `render()` returned for these messages. */
  rendered: RenderedPrompt;
  generatedIds: number[];
  logprobs: number[];
  /** The message returned to the client (parsed content, reasoning, tool calls). */
  assistantMessage: ChatMessage | null;
  finishReason: string | null;
  policyVersion: number;
  timings: CallTimings;
  /** Defaults to `<episodeId>:<index>`. */
  callId?: string;
  /**
   * Ids the server appended to the rendered prompt to force how the answer starts (tool_choice: the opening of a
   * tool-call block); they end `rendered.promptIds`. The re-rendered turn holds them together with the generation.
   */
  forcedPrefixIds?: number[];
}

export interface EpisodeTrackerInit {
  episodeId: string;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  sink?: CallSink;
}

export class EpisodeTracker {
  readonly episodeId: string;
  private readonly tokenizer: Tokenizer;
  private readonly template: ChatTemplate;
  private readonly sink: CallSink | undefined;
  private readonly recorded: CallRecord[] = [];
  private readonly forcedPrefixes = new Map<string, readonly number[]>();
  private readonly pieceCache = new PieceCache();

  constructor(init: EpisodeTrackerInit) {
    this.episodeId = init.episodeId;
    this.tokenizer = init.tokenizer;
    this.template = init.template;
    this.sink = init.sink;
  }

  /** The calls recorded so far, in completion order. */
  get calls(): readonly CallRecord[] {
    return this.recorded;
  }

  /** Renders and tokenizes a request of this episode, splicing in what earlier calls generated. */
  render(messages: ChatMessage[], options: RenderOptions = {}): RenderedPrompt {
    const history = this.recorded.map((call) => ({
      callId: call.callId,
      promptIds: call.promptIds,
      generatedIds: call.generatedIds,
      assistantMessage: call.assistantMessage,
      forcedPrefixIds: this.forcedPrefixes.get(call.callId),
    }));
    return renderPrompt({
      tokenizer: this.tokenizer,
      template: this.template,
      messages,
      tools: options.tools,
      enableThinking: options.enableThinking,
      templateKwargs: options.templateKwargs,
      history,
      pieceCache: this.pieceCache,
    });
  }

  /** Records a completed call (in memory and through the sink) and returns it. */
  record(input: RecordCallInput): CallRecord {
    if (input.logprobs.length !== input.generatedIds.length) {
      throw new CallRecordError(
        `${input.logprobs.length} logprobs for ${input.generatedIds.length} generated tokens`,
      );
    }
    const index = this.recorded.length;
    const call: CallRecord = {
      callId: input.callId ?? `${this.episodeId}:${index}`,
      index,
      agentKey: agentKeyOf(input.messages, input.tools),
      messages: input.messages,
      tools: input.tools ?? null,
      promptIds: input.rendered.promptIds,
      generatedIds: input.generatedIds,
      logprobs: input.logprobs,
      assistantMessage: input.assistantMessage,
      finishReason: input.finishReason,
      policyVersion: input.policyVersion,
      timings: input.timings,
      splice: input.rendered.splice,
    };
    if (this.recorded.some((c) => c.callId === call.callId))
      throw new CallRecordError(`call id ${call.callId} is already recorded`);
    this.sink?.(this.episodeId, call);
    this.recorded.push(call);
    if (input.forcedPrefixIds?.length) this.forcedPrefixes.set(call.callId, input.forcedPrefixIds);
    return call;
  }

  merge(mode: MergeMode = 'merged'): MergeResult {
    return mergeTimelines(toMergeCalls(this.recorded), mode);
  }
}

/**
 * Which agent made a call: a short hash of its system prompt and tool names. Two agents of one episode (planner
 * and coder, say) get different keys, so the merge view can say "different agent" instead of "prefix mismatch".
 */
export function agentKeyOf(messages: ChatMessage[], tools?: ToolSpec[]): string {
  const system = messages[0]?.role === 'system' ? (messages[0].content ?? '') : '';
  const toolNames = (tools ?? []).map((t) => t.function.name).sort();
  return createHash('sha256')
    .update(JSON.stringify([system, toolNames]))
    .digest('hex')
    .slice(0, 12);
}

/** The trackers of a peer's live episodes. */
export class ContextTracker {
  private readonly episodes = new Map<string, EpisodeTracker>();

  constructor(private readonly defaults: { sink?: CallSink } = {}) {}

  begin(init: EpisodeTrackerInit): EpisodeTracker {
    if (this.episodes.has(init.episodeId)) throw new EpisodeAlreadyTrackedError(init.episodeId);
    const tracker = new EpisodeTracker({ ...init, sink: init.sink ?? this.defaults.sink });
    this.episodes.set(init.episodeId, tracker);
    return tracker;
  }

  get(episodeId: string): EpisodeTracker {
    const tracker = this.episodes.get(episodeId);
    if (!tracker) throw new UntrackedEpisodeError(episodeId);
    return tracker;
  }

  has(episodeId: string): boolean {
    return this.episodes.has(episodeId);
  }

  /** Stops tracking the episode and returns its tracker (to merge and persist). */
  finish(episodeId: string): EpisodeTracker {
    const tracker = this.get(episodeId);
    this.episodes.delete(episodeId);
    return tracker;
  }

  get size(): number {
    return this.episodes.size;
  }
}
