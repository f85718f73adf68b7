/** A real SQLITE_FULL, as a full disk gives it to the store: a database capped at a few pages, filled past them. */
import Database from 'better-sqlite3';

export function sqliteFullError(): unknown {
  const db = new Database(':memory:');
  try {
    db.pragma('max_page_count = 2');
    db.exec('CREATE TABLE t (x BLOB)');
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    for (;;) insert.run(Buffer.alloc(4096));
  } catch (err) {
    return err;
  } finally {
    db.close();
  }
}
