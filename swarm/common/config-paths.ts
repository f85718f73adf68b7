/**
 * A nested configuration as a flat table of dot paths (`train.learningRate`), for showing, diffing and comparing
 * runs' settings: the peer (a config change's event, the keys a comparison highlights), the CLI and the UI read
 * them the same way.
 */

/** Every leaf of `config` under its dot path. Arrays, null and empty objects are leaves: a diff compares them whole. */
export function flattenConfig(config: Record<string, unknown>, prefix = ''): Map<string, unknown> {
  const flat = new Map<string, unknown>();
  for (const [name, value] of Object.entries(config)) {
    const key = prefix ? `${prefix}.${name}` : name;
    if (isPlainObject(value) && Object.keys(value).length > 0) for (const [inner, leaf] of flattenConfig(value, key)) flat.set(inner, leaf);
    else flat.set(key, value);
  }
  return flat;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
