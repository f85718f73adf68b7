import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cleanStaleTempFiles, isDiskFullError, tempPathFor, writeFileAtomic } from './atomic-file.ts';
import { loadOrCreateIdentity } from './identity.ts';

/** A pid no process has: Linux pids stay below 2^22. */
const DEAD_PID = 2 ** 22 + 7;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-atomic-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('writeFileAtomic', () => {
  it('on a full disk throws DiskFullError and leaves neither a temp file nor a half-written file', () => {
    const path = join(dir, 'identity.json');
    // The temp file lands on /dev/full, which answers every write with ENOSPC as a full disk does.
    symlinkSync('/dev/full', tempPathFor(path));
    let thrown: unknown;
    try {
      writeFileAtomic(path, '{"a":1}\n');
    } catch (err) {
      thrown = err;
    }
    expect((thrown as Error).name).toBe('DiskFullError');
    expect(isDiskFullError(thrown)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('replaces the file whole', () => {
    const path = join(dir, 'control.json');
    writeFileSync(path, 'old');
    writeFileAtomic(path, 'new', { mode: 0o600 });
    expect(readFileSync(path, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['control.json']);
  });
});

describe('cleanStaleTempFiles', () => {
  it('removes temp files of processes that are gone, keeps those of live ones and other files', () => {
    writeFileSync(join(dir, `identity.json.${DEAD_PID}.tmp`), '{');
    writeFileSync(join(dir, `control.json.${DEAD_PID}.tmp`), '{');
    writeFileSync(join(dir, `control.json.${process.ppid}.tmp`), '{');
    writeFileSync(join(dir, 'notes.tmp'), 'x');
    expect(cleanStaleTempFiles(dir, ['identity.json'])).toEqual([`identity.json.${DEAD_PID}.tmp`]);
    expect(cleanStaleTempFiles(dir)).toEqual([`control.json.${DEAD_PID}.tmp`]);
    expect(readdirSync(dir).sort()).toEqual([`control.json.${process.ppid}.tmp`, 'notes.tmp']);
    expect(cleanStaleTempFiles(join(dir, 'missing'))).toEqual([]);
  });

  it('runs when the identity is loaded: a start killed mid-write leaves nothing behind', () => {
    writeFileSync(join(dir, `identity.json.${DEAD_PID}.tmp`), '{"nodeId":');
    const identity = loadOrCreateIdentity(join(dir, 'identity.json'));
    expect(readdirSync(dir)).toEqual(['identity.json']);
    expect(loadOrCreateIdentity(join(dir, 'identity.json'))).toEqual(identity);
    expect(existsSync(tempPathFor(join(dir, 'identity.json')))).toBe(false);
  });
});
