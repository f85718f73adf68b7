/**
 * Incremental decoding for streaming: token ids go in one at a time, finished text comes out. A character whose
 * bytes are spread over several tokens is emitted only once all of them have arrived.
 */
import type { Tokenizer } from './types.ts';

const REPLACEMENT_CHARACTER = '\uFFFD';

export class StreamDecoder {
  private readonly ids: number[] = [];
  /** Start of the window that is re-decoded: tokens before it never change the text again. */
  private prefixOffset = 0;
  /** Tokens before this index have been emitted. */
  private readOffset = 0;
  private emitted = '';

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly options: { skipSpecialTokens?: boolean } = {},
  ) {}

  /** All text emitted so far. */
  get text(): string {
    return this.emitted;
  }

  /** Adds one token; returns the text it completed ('' while a character is still incomplete). */
  push(id: number): string {
    this.ids.push(id);
    // Decoding a window that starts a few tokens back keeps decoders that treat the first token specially
    // (leading-space stripping) consistent with decoding the whole sequence.
    const prefixText = this.decode(this.prefixOffset, this.readOffset);
    const fullText = this.decode(this.prefixOffset, this.ids.length);
    if (fullText.length <= prefixText.length || fullText.endsWith(REPLACEMENT_CHARACTER)) return '';
    const delta = fullText.slice(prefixText.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.emitted += delta;
    return delta;
  }

  /** At the end of generation: whatever is still held back, invalid bytes decoded as U+FFFD. */
  flush(): string {
    const prefixText = this.decode(this.prefixOffset, this.readOffset);
    const fullText = this.decode(this.prefixOffset, this.ids.length);
    const delta = fullText.slice(prefixText.length);
    this.prefixOffset = this.readOffset = this.ids.length;
    this.emitted += delta;
    return delta;
  }

  private decode(start: number, end: number): string {
    return start >= end ? '' : this.tokenizer.decode(this.ids.slice(start, end), this.options);
  }
}

export interface StopStringMatch {
  stopString: string;
  /** Index in the searched text where the stop string begins. */
  index: number;
}

/** The stop string that occurs earliest in `text` (searching from `fromIndex`), or null. */
export function findStopString(
  text: string,
  stopStrings: readonly string[],
  fromIndex = 0,
): StopStringMatch | null {
  let best: StopStringMatch | null = null;
  for (const stopString of stopStrings) {
    if (stopString === '') continue;
    const index = text.indexOf(stopString, fromIndex);
    if (index >= 0 && (best === null || index < best.index)) best = { stopString, index };
  }
  return best;
}

/**
 * How many characters at the end of `text` could be the start of a stop string: a streaming caller holds those
 * back, so that a stop string is never shown half-written.
 */
export function stopStringHoldback(text: string, stopStrings: readonly string[]): number {
  let holdback = 0;
  for (const stopString of stopStrings) {
    for (let length = Math.min(stopString.length - 1, text.length); length > holdback; length--) {
      if (text.endsWith(stopString.slice(0, length))) {
        holdback = length;
        break;
      }
    }
  }
  return holdback;
}

/**
 * Watches generated text for stop strings as tokens are decoded. Each `push` searches only the new text plus the
 * tail where a stop string could straddle the old and new parts.
 */
export class StopStringDetector {
  private text = '';
  private readonly longest: number;

  constructor(private readonly stopStrings: readonly string[]) {
    this.longest = Math.max(0, ...stopStrings.map((s) => s.length));
  }

  /** Adds newly decoded text; returns the first stop string found so far (index into all text pushed), or null. */
  push(delta: string): StopStringMatch | null {
    const searchFrom = Math.max(0, this.text.length - this.longest + 1);
    this.text += delta;
    if (this.longest === 0) return null;
    return findStopString(this.text, this.stopStrings, searchFrom);
  }
}
