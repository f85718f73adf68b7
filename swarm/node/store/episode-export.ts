/**
 * Many episodes as export records (swarm/common/timeline/export.ts), oldest first, for `GET /api/episodes.jsonl`
 * and `agentjet episodes export --all`. The table is read in chunks with a keyset cursor on (created_at, id): each
 * chunk is one bounded query that starts where the last one stopped, so exporting 100,000 episodes holds one chunk
 * of ids and one export in memory, no statement stays open while the consumer works, and episodes stored meanwhile
 * neither shift nor repeat what is still to come (unlike OFFSET).
 */
import type { Database } from 'better-sqlite3';
import type { Tokenizer } from '../../../worker/tokenizer/types.ts';
import type { EpisodeExport } from '../../common/timeline/export.ts';
import type { MergeMode } from '../../common/timeline/merge.ts';
import { EpisodeNotFoundError, EpisodeQueryError } from './episode-errors.ts';
import { selectionConditions, type EpisodeSelection } from './episode-list.ts';
import { getEpisodeExport } from './episode-reads.ts';
import { statement } from './statements.ts';

/** Episodes per keyset query: one query per 200 exports is noise next to their calls' reads, and 200 ids are small. */
export const EXPORT_CHUNK_DEFAULT = 200;
/** A chunk larger than this would be a page of the whole table; the cursor is the point. */
export const EXPORT_CHUNK_MAX = 5_000;

export interface EpisodeExportOptions {
  /** The merge mode of the records (default: each episode's stored timelines, as /api/episodes/:id/export). */
  mode?: MergeMode;
  /** Episodes per keyset query, 1 to EXPORT_CHUNK_MAX (default EXPORT_CHUNK_DEFAULT). */
  chunkSize?: number;
  /** Called with the number of rows each keyset query returned (tests check the reads stay bounded). */
  onChunk?: (rows: number) => void;
}

/** The token spelling for an episode's model (the route uses the hosted model's tokenizer, else byte spellings). */
export type TokenizerFor = (model: string) => Pick<Tokenizer, 'idToToken'>;

interface CursorRow {
  id: string;
  model: string;
  created_at: string;
}

/**
 * The exports of the selected episodes, oldest first (created_at, then id). Lazy: nothing is read until the first
 * `next()`, and a consumer that stops early (a client that hung up) stops the reads.
 */
export function* exportEpisodes(
  db: Database,
  selection: EpisodeSelection,
  tokenizerFor: TokenizerFor,
  options: EpisodeExportOptions = {},
): Generator<EpisodeExport, void, undefined> {
  const chunkSize = options.chunkSize ?? EXPORT_CHUNK_DEFAULT;
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > EXPORT_CHUNK_MAX)
    throw new EpisodeQueryError(`chunkSize must be an integer from 1 to ${EXPORT_CHUNK_MAX}`);
  const { conditions, params } = selectionConditions(selection);
  const first = chunkQuery(conditions);
  const next = chunkQuery([...conditions, '(e.created_at, e.id) > (@afterCreatedAt, @afterId)']);
  let after: CursorRow | undefined;
  for (;;) {
    const rows = (
      after === undefined
        ? statement(db, first).all({ ...params, chunk: chunkSize })
        : statement(db, next).all({ ...params, chunk: chunkSize, afterCreatedAt: after.created_at, afterId: after.id })
    ) as CursorRow[];
    options.onChunk?.(rows.length);
    for (const row of rows) {
      const record = exportOrSkip(db, row, tokenizerFor, options.mode);
      if (record) yield record;
    }
    if (rows.length < chunkSize) return;
    after = rows[rows.length - 1];
  }
}

function chunkQuery(conditions: string[]): string {
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  return `SELECT e.id, e.model, e.created_at FROM episodes e ${where} ORDER BY e.created_at, e.id LIMIT @chunk`;
}

/** An episode removed between its chunk's query and its export is skipped, not an error for the whole export. */
function exportOrSkip(
  db: Database,
  row: CursorRow,
  tokenizerFor: TokenizerFor,
  mode: MergeMode | undefined,
): EpisodeExport | undefined {
  try {
    return getEpisodeExport(db, row.id, tokenizerFor(row.model), mode);
  } catch (err) {
    if (err instanceof EpisodeNotFoundError) return undefined;
    throw err;
  }
}
