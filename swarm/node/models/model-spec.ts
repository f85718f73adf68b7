/**
 * What the user writes to host a model (`--model builtin:tiny`, `--model ./Qwen3-0.6B`, `--alias qwen=Qwen3-0.6B`,
 * or the `models:` list of a config file) turned into HostedModelSpecs.
 */
import { existsSync, statSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { BUILTIN_CONFIGS } from '../../../worker/builtin.ts';
import type { ModelSource } from '../../../worker/common/engine.ts';
import { DEFAULT_POOL_LIMIT, ModelSpecError, type HostedModelSpec } from './model-host.ts';

export interface ModelEntry {
  /** `builtin:NAME` or a Hugging Face model folder. */
  source: string;
  name?: string;
  aliases?: string[];
  poolLimit?: number;
  drainTimeoutS?: number;
  maxIdleTimeoutS?: number;
}

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

export function parseModelSource(text: string, baseDir = process.cwd()): ModelSource {
  if (text.startsWith('builtin:')) {
    const name = text.slice('builtin:'.length);
    if (!name) throw new ModelSpecError('"builtin:" needs a model name, e.g. builtin:tiny');
    // Checked here, before any engine starts: an unknown name would otherwise fail only once the peer is up.
    const known = Object.keys(BUILTIN_CONFIGS);
    if (!known.includes(name)) throw new ModelSpecError(`unknown built-in model "builtin:${name}"; the built-in models are ${known.map((k) => `builtin:${k}`).join(', ')}`);
    return { kind: 'builtin', name };
  }
  const path = resolve(baseDir, text);
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    throw new ModelSpecError(`model folder ${path} does not exist; give a Hugging Face model folder (config.json, *.safetensors, tokenizer.json) or builtin:tiny`);
  }
  return { kind: 'hf', path };
}

export function defaultModelName(source: ModelSource): string {
  return source.kind === 'builtin' ? source.name : basename(source.path);
}

/** Entries and `NAME=MODEL` aliases (MODEL: a model's name) into specs; names and aliases must be unique and valid. */
export function resolveModelSpecs(entries: ModelEntry[], aliases: string[] = [], baseDir = process.cwd()): HostedModelSpec[] {
  const specs = entries.map((entry): HostedModelSpec => {
    const source = parseModelSource(entry.source, baseDir);
    return {
      name: entry.name ?? defaultModelName(source),
      source,
      aliases: [...(entry.aliases ?? [])],
      poolLimit: entry.poolLimit ?? DEFAULT_POOL_LIMIT,
      ...(entry.drainTimeoutS === undefined ? {} : { drainTimeoutS: entry.drainTimeoutS }),
      ...(entry.maxIdleTimeoutS === undefined ? {} : { maxIdleTimeoutS: entry.maxIdleTimeoutS }),
    };
  });
  for (const alias of aliases) {
    const eq = alias.indexOf('=');
    if (eq <= 0 || eq === alias.length - 1) throw new ModelSpecError(`alias "${alias}" must look like NAME=MODEL`);
    const [name, target] = [alias.slice(0, eq), alias.slice(eq + 1)];
    const spec = specs.find((s) => s.name === target);
    if (!spec) throw new ModelSpecError(`alias "${alias}" points at "${target}", which is not a hosted model (${specs.map((s) => s.name).join(', ') || 'none'})`);
    spec.aliases.push(name);
  }
  const seen = new Set<string>();
  for (const spec of specs) {
    for (const name of [spec.name, ...spec.aliases]) {
      if (!NAME_PATTERN.test(name)) throw new ModelSpecError(`model name "${name}" is not valid: letters, digits and . _ : / - (at most 128)`);
      if (seen.has(name)) throw new ModelSpecError(`model name "${name}" is used twice; give one of the models another name`);
      seen.add(name);
    }
  }
  return specs;
}
