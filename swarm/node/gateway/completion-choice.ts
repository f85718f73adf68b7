/**
 * One sampled choice of a chat completion, token by token: decodes the engine's tokens incrementally, splits the
 * text into reasoning / content / tool calls (output-stream.ts), gathers logprobs, and at the end gives the
 * OpenAI choice and the assistant message the tracker records.
 */
import { randomBytes } from 'node:crypto';
import type { GenerateResult, GeneratedToken } from '../../../worker/common/engine.ts';
import { StreamDecoder } from '../../../worker/tokenizer/stream-decoder.ts';
import type { ChatMessage, Tokenizer, ToolCall } from '../../../worker/tokenizer/types.ts';
import { OutputStream, type OutputEvent } from './output-stream.ts';

export interface LogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export type OpenAiFinishReason = 'stop' | 'length' | 'tool_calls';

export interface ChoiceOptions {
  index: number;
  tokenizer: Tokenizer;
  stopTokenIds: number[];
  stopStrings: string[];
  parseToolCalls: boolean;
  /** Text the prompt already holds for this answer (a forced tool-call opening): parsed as if generated. */
  forcedPrefix: string;
  wantLogprobs: boolean;
}

const encoder = new TextEncoder();
/** How a forced tool call's opening begins (Hermes format, as output-stream.ts parses it). */
const TOOL_CALL_OPEN = '<tool_call>';

export function newToolCallId(): string {
  return `call_${randomBytes(12).toString('base64url')}`;
}

export class CompletionChoice {
  readonly tokens: GeneratedToken[] = [];
  private readonly decoder: StreamDecoder;
  private readonly output: OutputStream;
  private readonly stopIds: Set<number>;
  private pendingLogprobs: LogprobEntry[] = [];
  /** How many of `tokens` were handed out by takeTokenIds. */
  private tokenIdsTaken = 0;
  private readonly allLogprobs: LogprobEntry[] = [];
  private content = '';
  private reasoning = '';
  /** The think block's framing newlines are the template's, not the model's thought: trimmed as they stream. */
  private readonly reasoningDeltas = new TrimmedDeltas();
  /** Generated tokens up to the one that ended the reasoning (Responses' `reasoning_tokens`). */
  private tokensThroughReasoning = 0;
  private readonly toolCalls: ToolCall[] = [];
  /** A forced call was cut by the length limit before it closed. */
  private cutToolCall = false;

  constructor(private readonly options: ChoiceOptions) {
    this.decoder = new StreamDecoder(options.tokenizer);
    this.output = new OutputStream({
      parseToolCalls: options.parseToolCalls,
      stopStrings: options.stopStrings,
      newToolCallId,
      forcedToolCall: options.forcedPrefix.startsWith(TOOL_CALL_OPEN),
    });
    this.stopIds = new Set(options.stopTokenIds);
  }

  get index(): number {
    return this.options.index;
  }

  /** Feeds the forced prefix; returns its events (none for a tool-call opening: it is held until the block closes). */
  start(): OutputEvent[] {
    return this.accept(this.output.push(this.options.forcedPrefix));
  }

  /** One generated token; returns what became visible. */
  push(token: GeneratedToken): OutputEvent[] {
    this.tokens.push(token);
    // End-of-turn tokens are trained on but never shown; their text would be the tag itself.
    if (this.stopIds.has(token.id)) return [];
    if (this.options.wantLogprobs) this.addLogprob(token);
    return this.accept(this.output.push(this.decoder.push(token.id)));
  }

  /** End of generation: what was held back. */
  finish(): OutputEvent[] {
    const events = this.output.push(this.decoder.flush());
    return this.accept([...events, ...this.output.finish()]);
  }

  /** Logprobs gathered since the last call (streaming sends them with the next chunk). */
  takeLogprobs(): LogprobEntry[] {
    const taken = this.pendingLogprobs;
    this.pendingLogprobs = [];
    return taken;
  }

  /** Token ids generated since the last call, end-of-turn tokens included (`return_token_ids` streams them). */
  takeTokenIds(): number[] {
    const taken = this.tokens.slice(this.tokenIdsTaken).map((t) => t.id);
    this.tokenIdsTaken = this.tokens.length;
    return taken;
  }

  finishReason(result: GenerateResult): OpenAiFinishReason {
    // A forced call cut before it closed is a length stop, as OpenAI reports one (its arguments are incomplete).
    if (this.cutToolCall) return 'length';
    if (this.toolCalls.length > 0) return 'tool_calls';
    // A stop string found by our own scan (text level) also ends the answer normally.
    if (result.finishReason === 'length' && !this.output.stopped) return 'length';
    return 'stop';
  }

  /** How many generated tokens were reasoning: those up to the one whose text ended the think block. */
  get reasoningTokens(): number {
    return this.reasoning === '' ? 0 : this.tokensThroughReasoning;
  }

  /** The stop string that ended the answer, or null. */
  get stopString(): string | null {
    return this.output.stopString;
  }

  /**
   * The assistant message as the client receives it (and the tracker records it): the text as generated, untrimmed,
   * so a streaming client's concatenated deltas are the same message a non-streaming client gets.
   */
  message(): ChatMessage {
    const onlyToolCalls = this.toolCalls.length > 0 && this.content.trim() === '';
    const message: ChatMessage = { role: 'assistant', content: onlyToolCalls ? null : this.content };
    if (this.toolCalls.length > 0) message.tool_calls = this.toolCalls;
    if (this.reasoning !== '') message.reasoning_content = this.reasoning;
    return message;
  }

  logprobs(): { content: LogprobEntry[]; refusal: null } | null {
    return this.options.wantLogprobs ? { content: this.allLogprobs, refusal: null } : null;
  }

  private accept(events: OutputEvent[]): OutputEvent[] {
    const shown: OutputEvent[] = [];
    for (const event of events) {
      if (event.type === 'content') {
        this.content += event.text;
        shown.push(event);
      } else if (event.type === 'reasoning') {
        const text = this.reasoningDeltas.next(event.text);
        this.reasoning += text;
        this.tokensThroughReasoning = this.tokens.length;
        if (text !== '') shown.push({ type: 'reasoning', text });
      } else {
        this.toolCalls.push(event.call);
        if (event.partial) this.cutToolCall = true;
        shown.push(event);
      }
    }
    return shown;
  }

  private addLogprob(token: GeneratedToken) {
    const entry: LogprobEntry = {
      ...this.describe(token.id, token.logprob),
      top_logprobs: (token.top ?? []).map((alt) => this.describe(alt.id, alt.logprob)),
    };
    this.pendingLogprobs.push(entry);
    this.allLogprobs.push(entry);
  }

  private describe(id: number, logprob: number) {
    const token = this.options.tokenizer.decode([id]);
    return { token, logprob, bytes: [...encoder.encode(token)] };
  }
}

/**
 * Deltas whose concatenation is the trimmed whole: leading whitespace is dropped, and trailing whitespace is held
 * until non-space text follows it (whitespace still held at the end is never sent).
 */
class TrimmedDeltas {
  private started = false;
  private heldSpace = '';

  next(delta: string): string {
    const text = this.heldSpace + (this.started ? delta : delta.trimStart());
    const body = text.trimEnd();
    this.heldSpace = text.slice(body.length);
    if (body !== '') this.started = true;
    return body;
  }
}
