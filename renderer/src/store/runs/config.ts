/** A run's resolved configuration as a flat table: nested objects become dot paths (`train.learningRate`). */
import { flattenConfig } from '../../../../swarm/common/config-paths.ts';

/** Significant digits a config number is shown with: more than any setting means, fewer than float noise. */
const DISPLAY_DIGITS = 12;

export interface ConfigRow {
  key: string;
  /** The value as shown: numbers and strings as they are, anything else as JSON. */
  value: string;
  /** Differs from the defaults (run page) or among the runs (comparison). */
  highlighted: boolean;
}


export function formatConfigValue(value: unknown): string {
  if (value === undefined) return '—';
  if (typeof value === 'string') return value;
  // Twelve significant digits: a learning rate computed as 3 × 1e-5 reads 0.00003, not 0.00003000000000000004.
  if (typeof value === 'number') return String(Number(value.toPrecision(DISPLAY_DIGITS)));
  if (typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** The run page's table: every resolved key, sorted, the ones changed from the defaults highlighted. */
export function configRows(config: Record<string, unknown>, changedFromDefaults: readonly string[]): ConfigRow[] {
  const changed = new Set(changedFromDefaults);
  return [...flattenConfig(config)]
    .map(([key, value]) => ({ key, value: formatConfigValue(value), highlighted: changed.has(key) || [...changed].some((c) => key.startsWith(`${c}.`)) }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

export interface ConfigDiffRow {
  key: string;
  /** One value per run, in the runs' order ('—' where a run lacks the key). */
  values: string[];
  differs: boolean;
}

/**
 * The comparison's table: the union of every run's keys, sorted. A key differs as the peer says (`differingKeys`,
 * which may name a parent such as `lora`), or where the shown values differ (a key only some runs have).
 */
export function configDiffRows(configs: readonly Record<string, unknown>[], differingKeys: readonly string[]): ConfigDiffRow[] {
  const flats = configs.map((config) => flattenConfig(config));
  const keys = new Set<string>();
  for (const flat of flats) for (const key of flat.keys()) keys.add(key);
  const named = new Set(differingKeys);
  return [...keys].sort((a, b) => a.localeCompare(b)).map((key) => {
    const values = flats.map((flat) => (flat.has(key) ? formatConfigValue(flat.get(key)) : '—'));
    const differs = named.has(key) || differingKeys.some((d) => key.startsWith(`${d}.`)) || values.some((v) => v !== values[0]);
    return { key, values, differs };
  });
}
