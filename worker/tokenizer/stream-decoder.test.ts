import { describe, expect, it } from 'vitest';
import { ByteTokenizer, IM_END_ID } from './byte-tokenizer.ts';
import { StopStringDetector, StreamDecoder, findStopString, stopStringHoldback } from './stream-decoder.ts';

const tokenizer = new ByteTokenizer();

describe('StreamDecoder', () => {
  it('emits a multi-byte character only once all its tokens have arrived', () => {
    const decoder = new StreamDecoder(tokenizer);
    const deltas = tokenizer.encode('a🌍b中').map((id) => decoder.push(id));
    // 🌍 is 4 bytes and 中 is 3: nothing half-written ever comes out.
    expect(deltas).toEqual(['a', '', '', '', '🌍', 'b', '', '', '中']);
    expect(decoder.flush()).toBe('');
    expect(decoder.text).toBe('a🌍b中');
  });

  it('emits special tokens unless asked to skip them', () => {
    const withSpecials = new StreamDecoder(tokenizer);
    const skipping = new StreamDecoder(tokenizer, { skipSpecialTokens: true });
    for (const id of [...tokenizer.encode('ok'), IM_END_ID]) {
      withSpecials.push(id);
      skipping.push(id);
    }
    expect(withSpecials.text).toBe('ok<|im_end|>');
    expect(skipping.text).toBe('ok');
  });

  it('lets invalid bytes through as U+FFFD once later text shows they are not a character start', () => {
    const decoder = new StreamDecoder(tokenizer);
    expect(decoder.push(0xff)).toBe('');
    expect(decoder.push(0x41)).toBe('\uFFFDA');
  });

  it('flushes a character cut off at the end of generation as U+FFFD', () => {
    const decoder = new StreamDecoder(tokenizer);
    decoder.push(0x41);
    decoder.push(0xe2);
    decoder.push(0x82);
    expect(decoder.flush()).toBe('\uFFFD');
    expect(decoder.text).toBe('A\uFFFD');
  });
});

describe('stop strings', () => {
  it('finds the earliest stop string and where it starts', () => {
    expect(findStopString('abc END xyz STOP', ['STOP', 'END'])).toEqual({ stopString: 'END', index: 4 });
    expect(findStopString('nothing here', ['STOP'])).toBeNull();
    expect(findStopString('anything', [''])).toBeNull();
  });

  it('detects a stop string split across decoded deltas', () => {
    const detector = new StopStringDetector(['</answer>']);
    expect(detector.push('The answer is 4</ans')).toBeNull();
    expect(detector.push('wer> trailing')).toEqual({ stopString: '</answer>', index: 15 });
  });

  it('stops on a stop string while streaming byte tokens', () => {
    const decoder = new StreamDecoder(tokenizer);
    const detector = new StopStringDetector(['\n\n']);
    let stoppedAfter = -1;
    const ids = tokenizer.encode('first line\n\nsecond');
    for (const [i, id] of ids.entries()) {
      if (detector.push(decoder.push(id))) {
        stoppedAfter = i;
        break;
      }
    }
    expect(stoppedAfter).toBe('first line\n\n'.length - 1);
  });

  it('holds back the text that may be the start of a stop string', () => {
    expect(stopStringHoldback('hello </ans', ['</answer>'])).toBe(5);
    expect(stopStringHoldback('hello', ['</answer>'])).toBe(0);
    expect(stopStringHoldback('ab', ['bc', 'abx'])).toBe(2);
  });
});
