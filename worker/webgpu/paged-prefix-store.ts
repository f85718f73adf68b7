/**
 * Prefix caching for decoding on the device (the host's is worker/prefix-store.ts): finished sequences of the paged
 * KV pool are kept, and a prompt that starts like one shares its full pages (PagedKvPool.share: nothing copied) and
 * computes only the rest. No byte budget of its own: the pool is the budget. When a reservation finds too few free
 * pages, the pool asks the store (`reclaim`), which lets go of the least recently used sequences until enough are
 * free (a page still shared by a running sequence frees only when that one ends).
 *
 * Every kept sequence was computed by the weights of the moment: the owner clears the store whenever they change.
 */
import { MIN_REUSED_TOKENS } from '../prefix-store.ts';
import { commonPrefix } from '../prefix-tree.ts';
import { PAGE_SLOTS, type PagedKvPool, type PagedKvSequence } from './paged-kv-cache.ts';

interface Entry {
  seq: PagedKvSequence;
  usedAt: number;
}

export class PagedPrefixStore {
  private readonly entries: Entry[] = [];
  private clock = 0;

  constructor(readonly pool: PagedKvPool) {
    pool.reclaim = (pages) => this.reclaim(pages);
  }

  get size(): number {
    return this.entries.length;
  }

  /** Keep a finished sequence (its pages stay held); one shorter than a page or covered by an entry is released. */
  put(seq: PagedKvSequence): void {
    if (seq.length < Math.max(MIN_REUSED_TOKENS, PAGE_SLOTS)) {
      this.pool.release(seq);
      return;
    }
    // A sequence whose tokens an entry already covers adds nothing; one that extends an entry replaces it.
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const other = this.entries[i].seq;
      const shared = commonPrefix(other.tokens, seq.tokens);
      if (shared === seq.length) {
        this.entries[i].usedAt = ++this.clock;
        this.pool.release(seq);
        return;
      }
      if (shared === other.length) this.pool.release(this.entries.splice(i, 1)[0].seq);
    }
    this.entries.push({ seq, usedAt: ++this.clock });
  }

  /**
   * A new sequence sharing the kept pages of the longest common prefix with `prompt`, in whole pages and at most all
   * but the prompt's last token (whose logits the caller needs), leaving at most `maxRest` tokens to compute; null
   * when none shares MIN_REUSED_TOKENS. The caller computes `prompt` from the sequence's length on.
   */
  take(prompt: readonly number[], maxRest = Infinity): PagedKvSequence | null {
    let best: Entry | null = null;
    let bestLength = 0;
    for (const e of this.entries) {
      const common = Math.min(commonPrefix(e.seq.tokens, prompt), e.seq.length, prompt.length - 1);
      const length = common - (common % PAGE_SLOTS);
      if (length > bestLength && prompt.length - length <= maxRest) {
        best = e;
        bestLength = length;
      }
    }
    if (!best || bestLength < MIN_REUSED_TOKENS) return null;
    best.usedAt = ++this.clock;
    return this.pool.share(best.seq, bestLength);
  }

  /** Release the least recently used entries until `pages` more are free, or none is left. */
  private reclaim(pages: number): void {
    const target = this.pool.freePages + pages;
    while (this.pool.freePages < target && this.entries.length > 0) {
      const oldest = this.entries.reduce((a, b) => (a.usedAt <= b.usedAt ? a : b));
      this.entries.splice(this.entries.indexOf(oldest), 1);
      this.pool.release(oldest.seq);
    }
  }

  /** Release every entry (the weights changed, or the engine closes). */
  clear(): void {
    for (const e of this.entries.splice(0)) this.pool.release(e.seq);
  }
}
