/** Reads a model source's tokenizer files and builds its tokenizer and chat template. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelSource } from '../common/engine.ts';
import { TokenizerLoadError } from '../tokenizer/errors.ts';
import { builtinTokenizerBundle, hfTokenizerBundle, type TokenizerBundle } from '../tokenizer/load.ts';

export async function loadTokenizer(source: ModelSource): Promise<TokenizerBundle> {
  if (source.kind === 'builtin') return builtinTokenizerBundle();
  // Read together, but the first file in this order that fails is the one named (not whichever failed first).
  const [tokenizerJson, tokenizerConfig, chatTemplateFile] = await Promise.allSettled([
    readJsonFile(source.path, 'tokenizer.json'),
    readJsonFile(source.path, 'tokenizer_config.json'),
    readOptionalText(join(source.path, 'chat_template.jinja')),
  ]).then((results) =>
    results.map((r) => {
      if (r.status === 'rejected') throw r.reason;
      return r.value;
    }),
  );
  return hfTokenizerBundle({ tokenizerJson, tokenizerConfig, chatTemplateFile: chatTemplateFile as string | undefined });
}

async function readJsonFile(dir: string, file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(join(dir, file), 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'is missing' : 'cannot be read';
    throw new TokenizerLoadError(`${file} ${reason} in ${dir}`, file);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new TokenizerLoadError(`${file} in ${dir} is not valid JSON: ${(error as Error).message}`, file);
  }
}

async function readOptionalText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
