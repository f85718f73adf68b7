/**
 * Prefix caching for host decoding: the KV caches of finished sequences, kept (within a byte budget, least recently
 * used first out) so that a prompt starting with the same tokens (the next turn of a conversation, another sample
 * of the same task) copies the cached positions and computes only the rest.
 *
 * Every stored cache was computed by the weights of the moment: the owner clears the store whenever they change.
 */
import type { HostKvCache } from './kv-cache.ts';
import { commonPrefix, compareTokens } from './prefix-tree.ts';

/** Shorter common prefixes are recomputed: copying the cache would save little. */
export const MIN_REUSED_TOKENS = 16;

interface Entry {
  cache: HostKvCache;
  bytes: number;
  usedAt: number;
}

export class PrefixStore {
  private readonly entries: Entry[] = [];
  private clock = 0;

  constructor(private readonly budgetBytes: number) {}

  /** Keep a finished sequence's cache (its `tokens` say what it holds). */
  put(cache: HostKvCache): void {
    const bytes = cache.bytes;
    if (cache.length < MIN_REUSED_TOKENS || bytes > this.budgetBytes) return;
    // A cache whose tokens another entry already covers adds nothing; one that extends an entry replaces it.
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const other = this.entries[i].cache;
      const shared = commonPrefix(other.tokens, cache.tokens);
      if (shared === cache.length) {
        this.entries[i].usedAt = ++this.clock;
        return;
      }
      if (shared === other.length) this.entries.splice(i, 1);
    }
    this.entries.push({ cache, bytes, usedAt: ++this.clock });
    let total = this.entries.reduce((sum, e) => sum + e.bytes, 0);
    while (total > this.budgetBytes) {
      const oldest = this.entries.reduce((a, b) => (a.usedAt <= b.usedAt ? a : b));
      this.entries.splice(this.entries.indexOf(oldest), 1);
      total -= oldest.bytes;
    }
  }

  /**
   * A copy of the stored cache sharing the longest prefix with `prompt`, cut to what can be reused: at most all but
   * the prompt's last token (whose logits the caller needs), leaving at most `maxRest` tokens to compute. Null when
   * no entry shares MIN_REUSED_TOKENS.
   */
  take(prompt: readonly number[], maxRest = Infinity): HostKvCache | null {
    let best: Entry | null = null;
    let bestLength = 0;
    for (const e of this.entries) {
      const length = Math.min(commonPrefix(e.cache.tokens, prompt), prompt.length - 1);
      if (length > bestLength && prompt.length - length <= maxRest) {
        best = e;
        bestLength = length;
      }
    }
    if (!best || bestLength < MIN_REUSED_TOKENS) return null;
    best.usedAt = ++this.clock;
    return best.cache.copyPrefix(bestLength);
  }

  clear(): void {
    this.entries.length = 0;
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.length, bytes: this.entries.reduce((sum, e) => sum + e.bytes, 0) };
  }
}

/**
 * Prompts of one prefill batch that share a prefix of at least MIN_REUSED_TOKENS (the repeats of one task, started
 * together): clusters of prompt indices and the prefix all members share, at most all but the shortest member's last
 * token. Prompts in no cluster are left out.
 */
export function sharedPrefixGroups(prompts: readonly (readonly number[])[]): { members: number[]; length: number }[] {
  const order = prompts.map((_, i) => i).sort((a, b) => compareTokens(prompts[a], prompts[b]));
  const groups: { members: number[]; length: number }[] = [];
  let current: { members: number[]; length: number } | null = null;
  for (let k = 1; k < order.length; k++) {
    const [prev, next] = [order[k - 1], order[k]];
    const shared = Math.min(commonPrefix(prompts[prev], prompts[next]), prompts[prev].length - 1, prompts[next].length - 1);
    if (shared < MIN_REUSED_TOKENS) {
      current = null;
      continue;
    }
    if (current) {
      current.members.push(next);
      current.length = Math.min(current.length, shared);
    } else {
      current = { members: [prev, next], length: shared };
      groups.push(current);
    }
  }
  return groups;
}
