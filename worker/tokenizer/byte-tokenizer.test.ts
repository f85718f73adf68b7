import { describe, expect, it } from 'vitest';
import {
  BYTE_TOKENIZER_VOCAB_SIZE,
  ByteTokenizer,
  ENDOFTEXT_ID,
  IM_END_ID,
  IM_START_ID,
  PAD_ID,
  TOOL_CALL_END_ID,
  TOOL_CALL_START_ID,
  TOOL_RESPONSE_END_ID,
  TOOL_RESPONSE_START_ID,
} from './byte-tokenizer.ts';

const tokenizer = new ByteTokenizer();

describe('ByteTokenizer', () => {
  it('fixes the vocabulary the builtin model is trained on', () => {
    expect([
      ENDOFTEXT_ID,
      IM_START_ID,
      IM_END_ID,
      TOOL_CALL_START_ID,
      TOOL_CALL_END_ID,
      TOOL_RESPONSE_START_ID,
      TOOL_RESPONSE_END_ID,
      PAD_ID,
    ]).toEqual([256, 257, 258, 259, 260, 261, 262, 263]);
    expect(tokenizer.vocabSize).toBe(BYTE_TOKENIZER_VOCAB_SIZE);
    expect(BYTE_TOKENIZER_VOCAB_SIZE).toBe(264);
    expect(tokenizer.eosTokenIds).toEqual([258, 256]);
    expect(tokenizer.padTokenId).toBe(263);
  });

  it('encodes text as its UTF-8 bytes and round-trips emoji, CJK and accents', () => {
    expect(tokenizer.encode('Hi é')).toEqual([72, 105, 32, 0xc3, 0xa9]);
    for (const text of ['plain ascii', '日本語のテキスト', 'emoji 👩‍👩‍👧 🌍!', 'mixed é中🎉\n\ttabs', '']) {
      expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
    }
  });

  it('encodes special tokens written in the text to their single ids', () => {
    const ids = tokenizer.encode(
      '<|im_start|>user\nhi<|im_end|><tool_call></tool_call><tool_response></tool_response><|endoftext|><|pad|>',
    );
    expect(ids).toEqual([
      257,
      ...[...'user\nhi'].map((c) => c.charCodeAt(0)),
      258,
      259,
      260,
      261,
      262,
      256,
      263,
    ]);
    expect(tokenizer.decode(ids)).toBe(
      '<|im_start|>user\nhi<|im_end|><tool_call></tool_call><tool_response></tool_response><|endoftext|><|pad|>',
    );
  });

  it('skips special tokens on request and reports which ids are special', () => {
    expect(
      tokenizer.decode(tokenizer.encode('<|im_start|>assistant\nok<|im_end|>'), { skipSpecialTokens: true }),
    ).toBe('assistant\nok');
    expect(tokenizer.isSpecial(258)).toBe(true);
    expect(tokenizer.isSpecial(255)).toBe(false);
  });

  it('decodes invalid or cut UTF-8 to replacement characters instead of throwing', () => {
    const euro = [0xe2, 0x82, 0xac];
    expect(tokenizer.decode(euro)).toBe('€');
    expect(tokenizer.decode(euro.slice(0, 2))).toBe('\uFFFD');
    expect(tokenizer.decode([0xff, 0x41])).toBe('\uFFFDA');
    // A special token in the middle of a character ends it.
    expect(tokenizer.decode([0xe2, 0x82, IM_END_ID, 0x41])).toBe('\uFFFD<|im_end|>A');
  });

  it('spells tokens for display and rejects ids outside the vocabulary', () => {
    expect(tokenizer.idToToken(65)).toBe('A');
    expect(tokenizer.idToToken(10)).toBe('<0x0A>');
    expect(tokenizer.idToToken(259)).toBe('<tool_call>');
    expect(() => tokenizer.decode([264])).toThrow(expect.objectContaining({ name: 'InvalidTokenIdError' }));
    expect(() => tokenizer.idToToken(-1)).toThrow(expect.objectContaining({ name: 'InvalidTokenIdError' }));
  });
});
