/**
 * A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json), run by @huggingface/tokenizers in pure JS.
 */
import { Tokenizer as HfTokenizerImpl } from '@huggingface/tokenizers';
import { InvalidTokenIdError, TokenizerLoadError } from './errors.ts';
import type { Tokenizer } from './types.ts';

/** Turn-ending tokens that chat models use besides their configured eos token. */
const CHAT_END_TOKENS = ['<|im_end|>', '<|endoftext|>', '<|eot_id|>', '<|end_of_text|>'];

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly eosTokenIds: number[];
  readonly padTokenId: number;
  private readonly impl: HfTokenizerImpl;
  private readonly specialIds: Set<number>;

  constructor(tokenizerJson: unknown, tokenizerConfig: unknown) {
    if (!isObject(tokenizerJson) || !isObject(tokenizerJson.model)) {
      throw new TokenizerLoadError('tokenizer.json has no "model" section', 'tokenizer.json');
    }
    if (!isObject(tokenizerConfig))
      throw new TokenizerLoadError('tokenizer_config.json is not an object', 'tokenizer_config.json');
    try {
      this.impl = new HfTokenizerImpl(tokenizerJson, tokenizerConfig);
    } catch (error) {
      throw new TokenizerLoadError(
        `tokenizer.json is not understood: ${error instanceof Error ? error.message : String(error)}`,
        'tokenizer.json',
      );
    }
    this.vocabSize = this.impl.get_vocab(true).size;
    this.specialIds = new Set(
      [...this.impl.get_added_tokens_decoder().values()].filter((t) => t.special).map((t) => t.id),
    );

    const eos = new Set<number>();
    const configuredEos = tokenText(tokenizerConfig.eos_token);
    for (const text of [configuredEos, ...CHAT_END_TOKENS]) {
      const id = text === null ? undefined : this.impl.token_to_id(text);
      if (id !== undefined) eos.add(id);
    }
    if (eos.size === 0)
      throw new TokenizerLoadError(
        'no end-of-turn token: tokenizer_config.json names no known eos_token',
        'tokenizer_config.json',
      );
    this.eosTokenIds = [...eos];

    const padText = tokenText(tokenizerConfig.pad_token);
    this.padTokenId = (padText === null ? undefined : this.impl.token_to_id(padText)) ?? this.eosTokenIds[0];
  }

  encode(text: string): number[] {
    if (text === '') return [];
    // Chat prompts carry their special tokens in the text: no BOS/EOS is added by the post-processor.
    return this.impl.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: number[], options: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return '';
    for (const id of ids) this.checkId(id);
    return this.impl.decode(ids, { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  idToToken(id: number): string {
    this.checkId(id);
    return this.impl.id_to_token(id)!;
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || this.impl.id_to_token(id) === undefined)
      throw new InvalidTokenIdError(id);
  }
}

/** Token fields in tokenizer_config.json are a string, null, or (older files) `{ content: string, … }`. */
export function tokenText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (isObject(value) && typeof value.content === 'string') return value.content;
  return null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
