/** PEFT's `adapter_config.json` for LoRA adapters ⇄ the engine's LoraConfig. */
import type { LoraConfig } from '../common/engine.ts';
import { ModelConfigError } from './errors.ts';

/** The fields we read; every other field of adapter_config.json is kept as it is. */
export interface PeftAdapterConfig {
  r: number;
  lora_alpha: number;
  /** Module names, or (PEFT allows it) one regex over full module names. */
  target_modules: string[] | string;
  lora_dropout?: number;
  [field: string]: unknown;
}

/** What PEFT writes by default for a causal-LM LoRA adapter. */
const PEFT_DEFAULTS = {
  peft_type: 'LORA',
  task_type: 'CAUSAL_LM',
  bias: 'none',
  lora_dropout: 0,
  fan_in_fan_out: false,
  inference_mode: true,
};

export function parsePeftAdapterConfig(json: unknown): PeftAdapterConfig {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new ModelConfigError('adapter_config.json', 'is not a JSON object');
  const config = json as Record<string, unknown>;
  if (config.peft_type !== undefined && config.peft_type !== 'LORA')
    throw new ModelConfigError('peft_type', `${shown(config.peft_type)} is not supported (only LORA)`);
  const { r, lora_alpha: alpha, target_modules: targets, lora_dropout: dropout } = config;
  if (typeof r !== 'number' || !Number.isSafeInteger(r) || r <= 0)
    throw new ModelConfigError('r', 'must be a positive integer');
  if (typeof alpha !== 'number' || !(alpha > 0))
    throw new ModelConfigError('lora_alpha', 'must be a positive number');
  const targetsOk =
    typeof targets === 'string' ||
    (Array.isArray(targets) && targets.length > 0 && targets.every((t) => typeof t === 'string'));
  if (!targetsOk)
    throw new ModelConfigError(
      'target_modules',
      'must be a non-empty list of module names or a regex string',
    );
  if (
    dropout !== undefined &&
    dropout !== null &&
    (typeof dropout !== 'number' || dropout < 0 || dropout >= 1)
  ) {
    throw new ModelConfigError('lora_dropout', 'must be a number in [0, 1)');
  }
  return config as PeftAdapterConfig;
}

/** adapter_config.json contents for an adapter trained with `lora`. */
export function peftConfigFromLora(lora: LoraConfig, extra: Record<string, unknown> = {}): PeftAdapterConfig {
  return {
    ...PEFT_DEFAULTS,
    ...extra,
    r: lora.rank,
    lora_alpha: lora.alpha,
    target_modules: [...lora.targetModules],
    lora_dropout: lora.dropout ?? 0,
  };
}

export function loraFromPeftConfig(config: PeftAdapterConfig): LoraConfig {
  if (typeof config.target_modules === 'string') {
    throw new ModelConfigError('target_modules', 'a regex is not supported here; list the module names');
  }
  return {
    rank: config.r,
    alpha: config.lora_alpha,
    targetModules: [...config.target_modules],
    dropout: config.lora_dropout ?? 0,
  };
}

/** A scalar as written; an object or array by its type (String() of one nested deep enough overflows the stack). */
function shown(value: unknown): string {
  return value !== null && typeof value === 'object' ? (Array.isArray(value) ? 'an array' : 'an object') : `"${String(value)}"`;
}
