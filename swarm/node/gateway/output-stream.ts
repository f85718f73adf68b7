/**
 * Turns a model's text, arriving a few characters at a time, into what a streaming client sees: reasoning deltas,
 * content deltas and whole tool calls. Text that might be the start of a marker (`<tool_call>`, `<think>`, a stop
 * string) is held back until it is known not to be one, so a client never sees half a tag or a stop string.
 *
 * Hermes format: `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`. A block is parsed when it closes (or
 * when generation ends inside it); one that does not parse is passed on as content, as the non-streaming parser does.
 */
import { parseAssistantOutput } from '../../../worker/tokenizer/tool-calls.ts';
import type { ToolCall } from '../../../worker/tokenizer/types.ts';

const TOOL_OPEN = '<tool_call>';
const TOOL_CLOSE = '</tool_call>';
const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';

export type OutputEvent =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  /** `partial`: the forced call was cut before it closed; its arguments are what was generated (a length stop). */
  | { type: 'tool_call'; call: ToolCall; partial?: boolean };

export interface OutputStreamOptions {
  /** Parse Hermes tool-call blocks (false when the request has no tools or tool_choice is 'none'). */
  parseToolCalls: boolean;
  /** The request's stop strings: output ends before the first one. */
  stopStrings: string[];
  newToolCallId: () => string;
  /**
   * The prompt forced the answer to open with a tool call (`tool_choice` naming a function, or required): a block
   * cut before it closes is still that call, with the arguments generated so far, never text with the template's tags.
   */
  forcedToolCall?: boolean;
}

type Mode = 'start' | 'reasoning' | 'content' | 'tool' | 'stopped';

export class OutputStream {
  private buffer = '';
  private mode: Mode = 'start';
  /** Every character pushed, and where the first stop string began in it (-1: none). */
  private all = '';
  private stopAt = -1;
  /** After a think block, the blank lines before the answer are dropped (as the non-streaming parser trims them). */
  private trimLeading = false;
  /** Tool-call blocks seen so far (the first is the forced one, when the prompt forced it). */
  private toolBlocks = 0;

  constructor(private readonly options: OutputStreamOptions) {}

  /** The model's text up to (not including) the first stop string. */
  get text(): string {
    return this.stopAt >= 0 ? this.all.slice(0, this.stopAt) : this.all;
  }

  /** Whether a stop string ended the output. */
  get stopped(): boolean {
    return this.stopAt >= 0;
  }

  /** The stop string that ended the output (Anthropic names it in `stop_sequence`), or null. */
  get stopString(): string | null {
    return this.stopAt >= 0 ? this.matchedStop : null;
  }
  private matchedStop: string | null = null;

  push(delta: string): OutputEvent[] {
    if (this.mode === 'stopped' || delta === '') return [];
    // Held-back text always contains any partial stop string, so searching the buffer is enough.
    const bufferStart = this.all.length - this.buffer.length;
    this.all += delta;
    this.buffer += delta;
    const stop = this.findStop(this.buffer, this.buffer.length - delta.length);
    if (stop < 0) return this.drain(false);
    this.stopAt = bufferStart + stop;
    this.buffer = this.buffer.slice(0, stop);
    const events = this.drain(true);
    this.mode = 'stopped';
    return events;
  }

  /** End of generation: flushes held-back text and an unclosed tool-call block. */
  finish(): OutputEvent[] {
    if (this.mode === 'stopped') return [];
    const events = this.drain(true);
    this.mode = 'stopped';
    return events;
  }

  private forcedBlock(): boolean {
    return Boolean(this.options.forcedToolCall) && this.toolBlocks === 0;
  }

  /** The forced call a length stop cut: its name (from the forced opening) and the arguments generated so far. */
  private cutForcedCall(block: string): ToolCall | null {
    const name = FORCED_NAME.exec(block)?.[1];
    const at = ARGUMENTS_KEY.exec(block);
    if (name === undefined) return null;
    const partial = at ? block.slice(at.index + at[0].length) : '';
    return { id: this.options.newToolCallId(), type: 'function', function: { name: JSON.parse(name) as string, arguments: partial } };
  }

  /** Index of the first stop string that ends at or after `from`, or -1. */
  private findStop(text: string, from: number): number {
    let first = -1;
    for (const stop of this.options.stopStrings) {
      const at = text.indexOf(stop, Math.max(0, from - stop.length + 1));
      if (at >= 0 && (first < 0 || at < first)) {
        first = at;
        this.matchedStop = stop;
      }
    }
    return first;
  }

  private drain(final: boolean): OutputEvent[] {
    const events: OutputEvent[] = [];
    let progressed = true;
    while (progressed && this.buffer !== '') {
      progressed = false;
      if (this.mode === 'start') {
        if (this.buffer.startsWith(THINK_OPEN)) {
          this.buffer = this.buffer.slice(THINK_OPEN.length);
          this.mode = 'reasoning';
          progressed = true;
        } else if (!final && THINK_OPEN.startsWith(this.buffer)) {
          return events;
        } else {
          this.mode = 'content';
          progressed = true;
        }
      } else if (this.mode === 'reasoning') {
        const close = this.buffer.indexOf(THINK_CLOSE);
        if (close >= 0) {
          push(events, 'reasoning', this.buffer.slice(0, close));
          this.buffer = this.buffer.slice(close + THINK_CLOSE.length);
          this.trimLeading = true;
          this.mode = 'content';
          progressed = true;
        } else {
          const safe = final ? this.buffer.length : this.buffer.length - heldBack(this.buffer, [THINK_CLOSE, ...this.options.stopStrings]);
          push(events, 'reasoning', this.buffer.slice(0, safe));
          this.buffer = this.buffer.slice(safe);
        }
      } else if (this.mode === 'content') {
        if (this.trimLeading) {
          this.buffer = this.buffer.replace(/^\s+/, '');
          if (this.buffer === '') return events;
          this.trimLeading = false;
        }
        const open = this.options.parseToolCalls ? this.buffer.indexOf(TOOL_OPEN) : -1;
        if (open >= 0) {
          push(events, 'content', this.buffer.slice(0, open));
          this.buffer = this.buffer.slice(open);
          this.mode = 'tool';
          progressed = true;
        } else {
          const markers = this.options.parseToolCalls ? [TOOL_OPEN, ...this.options.stopStrings] : this.options.stopStrings;
          const safe = final ? this.buffer.length : this.buffer.length - heldBack(this.buffer, markers);
          push(events, 'content', this.buffer.slice(0, safe));
          this.buffer = this.buffer.slice(safe);
        }
      } else if (this.mode === 'tool') {
        const close = this.buffer.indexOf(TOOL_CLOSE);
        if (close < 0 && !final) return events;
        const end = close >= 0 ? close + TOOL_CLOSE.length : this.buffer.length;
        const block = this.buffer.slice(0, end);
        const parsed = parseAssistantOutput(block, 'hermes', { newToolCallId: this.options.newToolCallId });
        const cut = parsed.toolCalls.length === 1 || close >= 0 || !this.forcedBlock() ? null : this.cutForcedCall(block);
        if (parsed.toolCalls.length === 1) events.push({ type: 'tool_call', call: parsed.toolCalls[0] });
        else if (cut) events.push({ type: 'tool_call', call: cut, partial: true });
        else push(events, 'content', block);
        this.toolBlocks++;
        this.buffer = this.buffer.slice(end);
        this.mode = 'content';
        progressed = true;
      }
    }
    return events;
  }
}

const FORCED_NAME = /"name"\s*:\s*("(?:[^"\\]|\\.)*")/;
const ARGUMENTS_KEY = /"arguments"\s*:\s*/;

function push(events: OutputEvent[], type: 'content' | 'reasoning', text: string) {
  if (text === '') return;
  const last = events.at(-1);
  if (last && last.type === type) last.text += text;
  else events.push({ type, text });
}

/** Length of the longest suffix of `text` that is a proper prefix of one of the markers (it may still become one). */
function heldBack(text: string, markers: string[]): number {
  let longest = 0;
  for (const marker of markers) {
    for (let n = Math.min(marker.length - 1, text.length); n > longest; n--) {
      if (text.endsWith(marker.slice(0, n))) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}
