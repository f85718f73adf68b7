/**
 * "Did you mean …?" for a mistyped name (a model, a flag): the known name nearest by edit distance, when it is
 * near enough to be a typo rather than another name.
 */

/** Edits allowed per this many characters of the typed name: "tinyy" → "tiny" (1 of 5), not "big" → "tiny". */
const CHARS_PER_EDIT = 3;
/** Even a long name is a typo of another only within this many edits. */
const MAX_EDITS = 3;

export function closestName(typed: string, known: readonly string[]): string | undefined {
  const allowed = Math.min(MAX_EDITS, Math.max(1, Math.floor(typed.length / CHARS_PER_EDIT)));
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(typed.toLowerCase(), name.toLowerCase());
    if (distance <= allowed && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Levenshtein distance (insert, delete, substitute), one row at a time. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}
