/**
 * The CLI's command shape. Each command declares its options once (node:util parseArgs config, strict, so an
 * unknown flag is an error) and returns an exit code. Wrong usage throws UsageError: the CLI prints the reason
 * and the command's usage and exits with 2.
 */
import type { ParseArgsConfig } from 'node:util';

export class UsageError extends Error {
  override name = 'UsageError';
}

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;
export type OptionValues = Record<string, string | boolean | string[] | boolean[] | undefined>;

export interface Command {
  name: string;
  summary: string;
  /** Usage text shown by `agentjet help NAME` and after a usage error. */
  usage: string;
  options: OptionSpec;
  /** Most commands take no positionals; those that do say how many. */
  positionals?: { min: number; max: number; names: string };
  run(values: OptionValues, positionals: string[]): Promise<number>;
}

export function parsePort(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535) throw new UsageError(`--port must be a whole number from 0 to 65535, got "${value}"`);
  return n;
}

export function parsePositiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1) throw new UsageError(`${flag} must be a whole number ≥ 1, got "${value}"`);
  return n;
}
