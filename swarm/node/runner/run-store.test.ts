/**
 * The runner's rows in SQLite, through its repositories (store/client-runs.ts, store/client-scripts.ts): a run's
 * abort code survives the store beside its reason, rows from before codes read back without one, versions
 * continue per name, and what is restorable is what was live.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clientRuns, type StoredClientRun } from '../store/client-runs.ts';
import { clientScripts } from '../store/client-scripts.ts';
import { openStore } from '../store/db.ts';
import { useRunnerFixture } from './testing/fixture.ts';

const { setup, attachInline } = useRunnerFixture();

function store() {
  return openStore(join(mkdtempSync(join(tmpdir(), 'agentjet-run-store-')), 'store.sqlite'));
}

const RUN: StoredClientRun = {
  episodeIds: ['ep_1'],
  client: 'c',
  scriptHash: 'h',
  taskId: 't',
  kind: 'train',
  status: 'aborted',
  code: 'time_limit',
  reason: 'time limit of 1 s exceeded; the process tree was killed',
  reward: null,
  exitCode: null,
  processMs: 1000,
  stdout: '',
  stderr: '',
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:01.000Z',
};

describe('client runs', () => {
  it('keep the abort code beside the reason; runs without a code read back with code null', () => {
    const db = store();
    const runs = clientRuns(db);
    expect(clientRuns(db)).toBe(runs);
    runs.insert(RUN);
    runs.insert({ ...RUN, code: null, reason: 'written before codes existed' });
    runs.insert({ ...RUN, client: 'other', status: 'ended', code: null, reason: null, reward: 1 });
    expect(runs.latest('c', 10).map((r) => [r.code, r.reason])).toEqual([
      ['time_limit', RUN.reason],
      [null, 'written before codes existed'],
    ]);
    expect(runs.latest(undefined, 1)).toEqual([{ ...RUN, client: 'other', status: 'ended', code: null, reason: null, reward: 1 }]);
    expect([runs.count(), runs.count('c')]).toEqual([3, 2]);
    db.close();
  });

  it('a runner with a store answers runs() from it, codes included', async () => {
    const db = store();
    const { runner } = await setup({ db });
    await attachInline(runner, 'stored', 'crash.mjs', 'process.exit(2);');
    await runner.settled('stored');
    expect(runner.runs('stored').map((r) => [r.status, r.code])).toEqual([['aborted', 'script_failed']]);
    expect(clientRuns(db).latest('stored', 10)).toEqual(runner.runs('stored'));
    await runner.close();
    db.close();
  });
});

describe('client scripts', () => {
  it('number versions per name and restore only what was live', () => {
    const db = store();
    const scripts = clientScripts(db);
    expect(scripts.latestVersion('a')).toBe(0);
    const version = { hash: 'h', file: '/s/a.mjs', origin: 'upload:a.mjs', options: { name: 'a' }, attachedAt: '2026-01-01T00:00:00.000Z' };
    scripts.insertVersion({ name: 'a', version: 1, ...version });
    scripts.insertVersion({ name: 'a', version: 2, ...version });
    expect(scripts.latestVersion('a')).toBe(2);
    const attachment = { version: 2, file: '/s/a.mjs', options: { name: 'a', concurrency: 3 }, reason: null, updatedAt: '2026-01-01T00:00:00.000Z' };
    scripts.saveAttachment({ name: 'a', state: 'running', ...attachment });
    scripts.saveAttachment({ name: 'b', state: 'detached', ...attachment });
    scripts.saveAttachment({ name: 'c', state: 'running', ...attachment });
    scripts.saveAttachment({ name: 'c', state: 'paused', ...attachment, reason: 'looking at it' });
    expect(scripts.restorable().map((r) => [r.name, r.state, r.reason, r.options])).toEqual([
      ['a', 'running', null, { name: 'a', concurrency: 3 }],
      ['c', 'paused', 'looking at it', { name: 'a', concurrency: 3 }],
    ]);
    db.close();
  });
});
