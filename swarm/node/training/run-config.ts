/**
 * A run's configuration as data: flattened to dot paths (`train.learningRate`), hashed (equal hashes, equal
 * configurations: a restart with the same hash continues the run), and compared key by key.
 */
import { createHash } from 'node:crypto';

export type FlatConfig = Record<string, unknown>;

/** `{train: {learningRate: 1}}` → `{"train.learningRate": 1}`; arrays and null are leaves. */
export function flattenConfig(value: Record<string, unknown>, prefix = ''): FlatConfig {
  const flat: FlatConfig = {};
  for (const [key, child] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (child !== null && typeof child === 'object' && !Array.isArray(child)) Object.assign(flat, flattenConfig(child as Record<string, unknown>, path));
    else flat[path] = child;
  }
  return flat;
}

/** Keys sorted at every level, so that equal configurations give equal text whatever order they were written in. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** 12 hex digits of the sha256 of the configuration and the model source it trains. */
export function configHash(config: object, source: string): string {
  return createHash('sha256').update(canonicalJson({ config, source })).digest('hex').slice(0, 12);
}

export interface ConfigChange {
  key: string;
  from: unknown;
  to: unknown;
}

/** The dot paths whose values differ between two configurations, sorted. */
export function configChanges(before: Record<string, unknown>, after: Record<string, unknown>): ConfigChange[] {
  const a = flattenConfig(before);
  const b = flattenConfig(after);
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return keys.filter((key) => canonicalJson(a[key]) !== canonicalJson(b[key])).map((key) => ({ key, from: a[key], to: b[key] }));
}

/** The keys whose values are not the same in every one of the configurations, sorted. */
export function differingKeys(configs: readonly Record<string, unknown>[]): string[] {
  const flats = configs.map((c) => flattenConfig(c));
  const keys = [...new Set(flats.flatMap((f) => Object.keys(f)))].sort();
  return keys.filter((key) => new Set(flats.map((f) => canonicalJson(f[key]))).size > 1);
}

/** "train.learningRate 0.00001 → 0.0003, groupSize 4 → 8" (at most `max` changes, then "+N more"). */
export function describeChanges(changes: readonly ConfigChange[], max = 3): string {
  const shown = changes.slice(0, max).map((c) => `${c.key} ${JSON.stringify(c.from ?? null)} → ${JSON.stringify(c.to ?? null)}`);
  return changes.length > max ? `${shown.join(', ')}, +${changes.length - max} more` : shown.join(', ');
}
