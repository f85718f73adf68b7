/**
 * Full-text search over what was said in an episode: the user, assistant, tool and system text of its calls'
 * messages (tool-call names and arguments and reasoning included), in an SQLite FTS5 table `episode_text`, one row
 * per stored call.
 *
 * A call's request repeats the conversation so far, so a row holds only the messages that changed since the same
 * agent's previous call (usually what it appended), plus the call's own answer: a 50-turn episode is indexed about
 * once, not 50 times.
 * A trigger on `calls` keeps the index (the write path stays one INSERT); migration 5 creates it and backfills.
 */

/** The table and its tokenizer: Unicode words, case- and accent-insensitive. */
export const EPISODE_TEXT_TABLE_SQL = `
  CREATE VIRTUAL TABLE episode_text USING fts5(
    text,
    episode_id UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 2'
  )`;

/** The searchable text of one chat message (a JSON value `m`). */
const messageText = (m: string) => `
  trim(
    coalesce(json_extract(${m}, '$.content'), '') || ' ' ||
    coalesce(json_extract(${m}, '$.reasoning_content'), '') || ' ' ||
    coalesce((
      SELECT group_concat(
        coalesce(json_extract(tc.value, '$.function.name'), '') || ' ' ||
        coalesce(json_extract(tc.value, '$.function.arguments'), ''), ' ')
      FROM json_each(${m}, '$.tool_calls') tc
    ), '')
  )`;

/**
 * The text to index for the call row `c` (a table alias, or NEW in a trigger): its messages that differ from the
 * message at the same position in the same agent's previous call (a request that extends the conversation differs
 * only in what it appended), then its answer; NULL when there is nothing to say. Compared by position, not searched:
 * a 50-turn request costs one pass over its messages.
 */
function callTextSql(c: string): string {
  const previousMessages = `(
    SELECT p.messages FROM calls p
    WHERE p.episode_id = ${c}.episode_id
      AND p.idx = (SELECT MAX(q.idx) FROM calls q WHERE q.episode_id = ${c}.episode_id AND q.agent_key = ${c}.agent_key AND q.idx < ${c}.idx)
  )`;
  return `(
    SELECT group_concat(text, char(10)) FROM (
      SELECT ${messageText('m.value')} AS text
      FROM json_each(${c}.messages) m
      WHERE json_extract(${previousMessages}, '$[' || m.key || ']') IS NOT m.value
      UNION ALL
      SELECT ${messageText(`${c}.assistant_message`)} WHERE ${c}.assistant_message IS NOT NULL
    ) WHERE text <> ''
  )`;
}

/** Keeps the index as calls are stored and episodes deleted. */
export const EPISODE_TEXT_TRIGGERS_SQL = `
  CREATE TRIGGER calls_index_text AFTER INSERT ON calls BEGIN
    INSERT INTO episode_text (text, episode_id)
    SELECT body, NEW.episode_id FROM (SELECT ${callTextSql('NEW')} AS body) WHERE body IS NOT NULL;
  END;
  CREATE TRIGGER episodes_unindex_text AFTER DELETE ON episodes BEGIN
    DELETE FROM episode_text WHERE episode_id = OLD.id;
  END;`;

/** Indexes the calls stored before the index existed. */
export const EPISODE_TEXT_BACKFILL_SQL = `
  INSERT INTO episode_text (text, episode_id)
  SELECT body, episode_id FROM (SELECT c.episode_id, ${callTextSql('c')} AS body FROM calls c ORDER BY c.episode_id, c.idx)
  WHERE body IS NOT NULL`;

/** Words of a search box's text as FTS5 sees them (letters and digits; everything else separates). */
const WORD = /[\p{L}\p{N}]+/gu;

/**
 * The FTS5 query for what a user typed: every word must occur, each as a prefix (`calc` finds `calculator`).
 * Words are quoted, so nothing typed is read as FTS5 syntax. null when the text has no words.
 */
export function episodeTextQuery(text: string): string | null {
  const words = text.match(WORD);
  if (!words) return null;
  return words.map((word) => `"${word}"*`).join(' ');
}
