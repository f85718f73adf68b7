/**
 * A run's configuration as data: hashed (equal hashes, equal configurations: a restart with the same hash
 * continues the run) and compared key by key over its dot paths (swarm/common/config-paths.ts).
 */
import { createHash } from 'node:crypto';
import { flattenConfig } from '../../common/config-paths.ts';

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
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort();
  return keys.filter((key) => canonicalJson(a.get(key)) !== canonicalJson(b.get(key))).map((key) => ({ key, from: a.get(key), to: b.get(key) }));
}

/** The keys whose values are not the same in every one of the configurations, sorted. */
export function differingKeys(configs: readonly Record<string, unknown>[]): string[] {
  const flats = configs.map((c) => flattenConfig(c));
  const keys = [...new Set(flats.flatMap((f) => [...f.keys()]))].sort();
  return keys.filter((key) => new Set(flats.map((f) => canonicalJson(f.get(key)))).size > 1);
}

/** "train.learningRate 0.00001 → 0.0003, groupSize 4 → 8" (at most `max` changes, then "+N more"). */
export function describeChanges(changes: readonly ConfigChange[], max = 3): string {
  const shown = changes.slice(0, max).map((c) => `${c.key} ${JSON.stringify(c.from ?? null)} → ${JSON.stringify(c.to ?? null)}`);
  return changes.length > max ? `${shown.join(', ')}, +${changes.length - max} more` : shown.join(', ');
}
