/**
 * The builtin byte-level tokenizer: ids 0–255 are the bytes of the UTF-8 text, then a few ChatML / Hermes
 * specials. The builtin tiny model is trained on this vocabulary, so the ids below are part of its checkpoint format.
 */
import { InvalidTokenIdError } from './errors.ts';
import type { Tokenizer } from './types.ts';

export const BYTE_COUNT = 256;
export const ENDOFTEXT_ID = 256;
export const IM_START_ID = 257;
export const IM_END_ID = 258;
export const TOOL_CALL_START_ID = 259;
export const TOOL_CALL_END_ID = 260;
export const TOOL_RESPONSE_START_ID = 261;
export const TOOL_RESPONSE_END_ID = 262;
export const PAD_ID = 263;
export const BYTE_TOKENIZER_VOCAB_SIZE = 264;

/** Special token spellings, indexed by `id - BYTE_COUNT`. */
export const BYTE_TOKENIZER_SPECIALS: readonly string[] = [
  '<|endoftext|>',
  '<|im_start|>',
  '<|im_end|>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<|pad|>',
];

const specialIdByText = new Map(BYTE_TOKENIZER_SPECIALS.map((text, i) => [text, BYTE_COUNT + i]));
// Longest first, so that no special is cut short by another that is its prefix.
const specialPattern = new RegExp(
  [...BYTE_TOKENIZER_SPECIALS]
    .sort((a, b) => b.length - a.length)
    .map((text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|'),
  'g',
);

// Non-fatal: invalid or cut UTF-8 decodes to U+FFFD. Without `stream`, each call is independent.
const utf8Decoder = new TextDecoder();

const PRINTABLE_ASCII_FIRST = 0x21;
const PRINTABLE_ASCII_LAST = 0x7e;

export class ByteTokenizer implements Tokenizer {
  readonly vocabSize = BYTE_TOKENIZER_VOCAB_SIZE;
  readonly eosTokenIds = [IM_END_ID, ENDOFTEXT_ID];
  readonly padTokenId = PAD_ID;
  private readonly encoder = new TextEncoder();

  encode(text: string): number[] {
    const ids: number[] = [];
    let plainStart = 0;
    for (const match of text.matchAll(specialPattern)) {
      this.pushBytes(ids, text.slice(plainStart, match.index));
      ids.push(specialIdByText.get(match[0])!);
      plainStart = match.index + match[0].length;
    }
    this.pushBytes(ids, text.slice(plainStart));
    return ids;
  }

  decode(ids: number[], options: { skipSpecialTokens?: boolean } = {}): string {
    let text = '';
    let pendingBytes: number[] = [];
    // Bytes are gathered until a special token interrupts them.
    const flushBytes = () => {
      if (pendingBytes.length > 0) text += utf8Decoder.decode(Uint8Array.from(pendingBytes));
      pendingBytes = [];
    };
    for (const id of ids) {
      this.checkId(id);
      if (id < BYTE_COUNT) {
        pendingBytes.push(id);
        continue;
      }
      flushBytes();
      if (!options.skipSpecialTokens) text += BYTE_TOKENIZER_SPECIALS[id - BYTE_COUNT];
    }
    flushBytes();
    return text;
  }

  idToToken(id: number): string {
    this.checkId(id);
    if (id >= BYTE_COUNT) return BYTE_TOKENIZER_SPECIALS[id - BYTE_COUNT];
    if (id >= PRINTABLE_ASCII_FIRST && id <= PRINTABLE_ASCII_LAST) return String.fromCharCode(id);
    return `<0x${id.toString(16).toUpperCase().padStart(2, '0')}>`;
  }

  isSpecial(id: number): boolean {
    return id >= BYTE_COUNT && id < BYTE_TOKENIZER_VOCAB_SIZE;
  }

  private pushBytes(ids: number[], text: string): void {
    for (const byte of this.encoder.encode(text)) ids.push(byte);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= BYTE_TOKENIZER_VOCAB_SIZE) throw new InvalidTokenIdError(id);
  }
}
