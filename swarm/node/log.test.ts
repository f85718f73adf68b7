import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger, type LogEntry } from './log.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-log-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('a log file that cannot be written', () => {
  it('drops and counts lines on a full disk (ENOSPC from /dev/full) and never throws', () => {
    const log = createLogger({ file: '/dev/full', consoleLevel: 'silent' });
    const seen: LogEntry[] = [];
    log.onEntry((entry) => seen.push(entry));
    expect(() => {
      log.error('request failed', { error: 'boom' });
      log.child({ component: 'x' }).info('still logging');
    }).not.toThrow();
    expect(log.dropped).toBe(2);
    expect(log.child({}).dropped).toBe(2);
    // Listeners (the UI's log view) still get every entry.
    expect(seen.map((e) => e.msg)).toEqual(['request failed', 'still logging']);
  });

  it('drops lines while peer.log is not a file and writes again once it can', () => {
    const logs = join(dir, 'logs');
    mkdirSync(join(logs, 'peer.log'), { recursive: true });
    const log = createLogger({ dir: logs, consoleLevel: 'silent' });
    log.warn('lost');
    expect(log.dropped).toBe(1);
    rmSync(join(logs, 'peer.log'), { recursive: true });
    log.info('kept');
    expect(log.dropped).toBe(1);
    expect(readFileSync(join(logs, 'peer.log'), 'utf8')).toContain('"msg":"kept"');
  });

  it('starts when its folder cannot be made, counting what it drops', () => {
    const log = createLogger({ dir: '/dev/full/logs', consoleLevel: 'silent' });
    log.info('nowhere to go');
    expect(log.dropped).toBe(1);
  });

  it('survives fields that do not serialize and listeners that throw', () => {
    const log = createLogger({ dir, consoleLevel: 'silent' });
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const seen: string[] = [];
    log.onEntry(() => {
      throw new Error('a closed socket');
    });
    log.onEntry((entry) => seen.push(entry.msg));
    expect(() => log.info('odd fields', { cycle, big: 1n })).not.toThrow();
    expect(seen).toEqual(['odd fields']);
    expect(readFileSync(join(dir, 'peer.log'), 'utf8')).toContain('"msg":"odd fields"');
    expect(log.dropped).toBe(0);
  });
});
