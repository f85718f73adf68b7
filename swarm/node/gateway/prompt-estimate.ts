/**
 * A prompt's length in tokens, bounded from below before it is rendered: a prompt certainly over the context is
 * refused without rendering and tokenizing it (a 7 MB prompt would hold the event loop for a second).
 */
import type { ChatMessage, Tokenizer } from '../../../worker/tokenizer/types.ts';

/**
 * A lower bound on the prompt's token count, from the messages alone — without rendering or tokenizing them, which
 * takes the event loop for a second on a 7 MB prompt. It must never be too high (that would refuse a prompt that
 * fits), so it counts only what certainly reaches the tokenizer and divides by the most bytes one token can hold:
 *  - only user, system and tool contents, trimmed: templates render those as given (some trim them); assistant
 *    turns are left out, since templates may drop parts of them (Qwen3 drops earlier turns' reasoning);
 *  - only their ASCII characters, which keep at least one byte each through the tokenizer's normalizer (NFC may
 *    compose a letter with the accents after it, but into a character of two bytes or more). A string of n UTF-16
 *    units and b UTF-8 bytes has at least 2n - b ASCII units, since every other unit takes at least 2 bytes (a
 *    surrogate pair 4): O(1), where counting them would read every character;
 *  - over `maxTokenBytes`, the longest text one token stands for (a byte-level token of 128 spaces is 128 bytes).
 * It assumes a normalizer that does not delete or merge ASCII characters (none, NFC/NFKC, lowercase, strip accents:
 * the models this gateway serves); a whitespace-collapsing one would need the rendered count.
 * Returns 0 when even one byte per token could not reach `threshold` (the usual prompt), so the vocabulary pass of
 * maxTokenBytes runs only once a large prompt comes.
 */
export function promptTokensAtLeast(messages: readonly ChatMessage[], tokenizer: Tokenizer, threshold: number): number {
  let asciiAtLeast = 0;
  for (const m of messages) {
    if (m.role === 'assistant' || m.content === null) continue;
    const text = m.content.trim();
    asciiAtLeast += Math.max(0, 2 * text.length - Buffer.byteLength(text));
  }
  if (asciiAtLeast < threshold) return 0;
  return Math.floor(asciiAtLeast / maxTokenBytes(tokenizer));
}

const maxTokenBytesCache = new WeakMap<Tokenizer, number>();

/**
 * An upper bound on the UTF-8 bytes of text any one token stands for. The spelling (idToToken) is never shorter than
 * the text (byte-level's `Ġ` is 2 bytes for a space, sentencepiece's `<0x0A>` 6 for a newline), so it bounds every
 * token in one pass (16-120 ms over Qwen's 151k, once). Decoding is exact but ~2.5 µs a token, so only tokens whose
 * spelling could still beat the best found are decoded: longest spelling first, until none can. Cached per tokenizer.
 */
export function maxTokenBytes(tokenizer: Tokenizer): number {
  const cached = maxTokenBytesCache.get(tokenizer);
  if (cached !== undefined) return cached;
  const spelled: { id: number; bytes: number }[] = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    try {
      spelled.push({ id, bytes: Buffer.byteLength(tokenizer.idToToken(id)) });
    } catch {
      // Vocabularies may have unused ids.
    }
  }
  spelled.sort((a, b) => b.bytes - a.bytes);
  const probe = tokenizer.encode('a');
  let best = 1;
  for (const { id, bytes } of spelled) {
    if (bytes <= best) break;
    best = Math.max(best, probe.length === 1 ? Math.min(bytes, decodedBytes(tokenizer, probe[0], id)) : bytes);
  }
  maxTokenBytesCache.set(tokenizer, best);
  return best;
}

/**
 * The bytes `id` adds after an ordinary token: decoders may treat a first token differently (sentencepiece strips its
 * leading space), which would undercount. A token that is part of a character decodes to U+FFFD, 3 bytes: an
 * overcount, the safe side.
 */
function decodedBytes(tokenizer: Tokenizer, probe: number, id: number): number {
  return Buffer.byteLength(tokenizer.decode([probe, id])) - Buffer.byteLength(tokenizer.decode([probe]));
}
