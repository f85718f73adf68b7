/**
 * Builds a tokenizer and its chat template from what a model source provides. Pure: the files are read by
 * worker/node/load-tokenizer.ts (`loadTokenizer(source)`).
 */
import { ByteTokenizer } from './byte-tokenizer.ts';
import { BuiltinChatTemplate, JinjaChatTemplate } from './chat-template.ts';
import { TokenizerLoadError } from './errors.ts';
import { HfTokenizer, tokenText } from './hf-tokenizer.ts';
import type { ChatTemplate, Tokenizer } from './types.ts';

export interface TokenizerBundle {
  tokenizer: Tokenizer;
  template: ChatTemplate;
}

/** The builtin models' vocabulary (bytes + ChatML/Hermes specials) and ChatML template. */
export function builtinTokenizerBundle(): TokenizerBundle {
  return { tokenizer: new ByteTokenizer(), template: new BuiltinChatTemplate() };
}

export interface HfTokenizerFiles {
  /** Parsed tokenizer.json. */
  tokenizerJson: unknown;
  /** Parsed tokenizer_config.json. */
  tokenizerConfig: unknown;
  /** Contents of chat_template.jinja, which newer checkpoints ship instead of `chat_template` in the config. */
  chatTemplateFile?: string;
}

export function hfTokenizerBundle(files: HfTokenizerFiles): TokenizerBundle {
  const config = (files.tokenizerConfig ?? {}) as Record<string, unknown>;
  const template = files.chatTemplateFile ?? pickChatTemplate(config.chat_template);
  if (template === null) {
    throw new TokenizerLoadError(
      'the model ships no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja)',
      'tokenizer_config.json',
    );
  }
  const tokenizer = new HfTokenizer(files.tokenizerJson, files.tokenizerConfig);
  return {
    tokenizer,
    template: new JinjaChatTemplate({
      template,
      bosToken: tokenText(config.bos_token),
      eosToken: tokenText(config.eos_token),
    }),
  };
}

/** `chat_template` is a string, or a list of `{ name, template }` of which "default" is the chat one. */
function pickChatTemplate(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return null;
  const named = value.filter(
    (entry): entry is { name: string; template: string } => typeof entry?.template === 'string',
  );
  return (named.find((entry) => entry.name === 'default') ?? named[0])?.template ?? null;
}
