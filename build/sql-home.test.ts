/**
 * One home for persistence: SQL is written only under swarm/node/store/ (its repositories, and its testing/ helpers
 * for what only tests read). A statement prepared or executed anywhere else fails here, named with its place.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const SEARCHED = ['swarm', 'bench', 'electron', 'e2e', 'examples', 'build'];
const HOME = 'swarm/node/store/';
/** `.prepare(` or `.exec(` given SQL text (a string or template literal), as better-sqlite3 takes it. */
const SQL_CALL = /\.(prepare|exec)\(\s*(['"`])\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|WITH|BEGIN|REPLACE)\b/i;

function sqlOutsideTheStore(text: string): number[] {
  return text.split('\n').flatMap((line, i) => (SQL_CALL.test(line) ? [i + 1] : []));
}

describe('SQL', () => {
  it('is recognised where it is written (the check can fail)', () => {
    expect(sqlOutsideTheStore("const x = db.prepare('SELECT 1');\nconst y = re.exec(text);\ndb.exec(`CREATE TABLE t (x)`);")).toEqual([1, 3]);
  });

  it('lives under swarm/node/store/ only', () => {
    const found: string[] = [];
    for (const dir of SEARCHED) {
      for (const file of readdirSync(path.join(REPO, dir), { recursive: true }) as string[]) {
        const rel = `${dir}/${file.split(path.sep).join('/')}`;
        if (!/\.(ts|tsx|mjs)$/.test(rel) || rel.includes('node_modules') || rel.startsWith(HOME) || rel === 'build/sql-home.test.ts') continue;
        for (const line of sqlOutsideTheStore(readFileSync(path.join(REPO, rel), 'utf8'))) found.push(`${rel}:${line}`);
      }
    }
    expect(found).toEqual([]);
  });
});
