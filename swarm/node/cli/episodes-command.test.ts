/**
 * `agentjet episodes` on a stopped peer's data dir (the store read directly, read-only), on a running peer (its
 * control API), and with neither; bad flag values are usage errors (exit 2). Asserts exit codes and error names.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { EpisodeExport } from '../../common/timeline/export.ts';
import { dataPaths } from '../paths.ts';
import { openStore } from '../store/db.ts';
import type { EpisodePage } from '../store/episode-list.ts';
import { insertEpisode, updateEpisodeState } from '../store/episodes.ts';
import { storeEndedEpisode } from '../store/testing/episodes.ts';
import { episodesCommand } from './episodes-command.ts';
import { openOfflineStore, peerOrOffline } from './offline-store.ts';
import { runCli, startPeerProcess, type PeerProcess } from './peer-process.ts';

const EPISODES = 30;
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-episodes-cli-'));
  dirs.push(dir);
  return dir;
};
let dataDir: string;

/** Episode i: model tiny unless odd, client c(i % 3), policy version i / 10, ended with reward i / 10 unless i % 5 == 0. */
function seedStore(dir: string): void {
  const db = openStore(dataPaths(dir).store);
  for (let i = 0; i < EPISODES; i++) {
    const id = `ep-${String(i).padStart(3, '0')}`;
    insertEpisode(db, {
      id,
      model: i % 2 === 0 ? 'tiny' : 'big',
      taskId: `task-${i % 4}`,
      kind: i % 6 === 0 ? 'eval' : 'train',
      policyVersion: Math.floor(i / 10),
      client: `c${i % 3}`,
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
    });
    if (i % 5 !== 0) updateEpisodeState(db, id, { state: 'ended', reward: i / 10 });
  }
  storeEndedEpisode(db, 'ep-full-99', 'tiny', 'full', 'calc');
  db.close();
}

beforeAll(() => {
  dataDir = tempDir();
  seedStore(dataDir);
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the command in this process; what it printed to stdout comes back with its exit code. */
async function run(args: Record<string, string | boolean>, positionals: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  });
  const quiet = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    const code = await episodesCommand.run({ 'data-dir': dataDir, ...args }, positionals);
    return { code, stdout };
  } finally {
    spy.mockRestore();
    quiet.mockRestore();
  }
}

const listed = async (args: Record<string, string | boolean>) =>
  (JSON.parse((await run({ ...args, json: true }, ['list'])).stdout) as EpisodePage).episodes.map((e) => e.id);

describe('agentjet episodes on a stopped peer’s data dir', () => {
  it('lists with filters and sort, shows and exports, without a peer', async () => {
    expect(await listed({ client: 'c1', version: '1', sort: 'oldest' })).toEqual(['ep-010', 'ep-013', 'ep-016', 'ep-019']);
    expect(await listed({ state: 'active', kind: 'train', model: 'big' })).toEqual(['ep-025', 'ep-015', 'ep-005']);
    expect((await listed({ sort: 'reward-desc', limit: '2' }))).toEqual(['ep-029', 'ep-028']);
    expect(await listed({ task: 'full' })).toEqual(['ep-full-99']);
    const shown = await run({ json: true }, ['show', 'ep-full-99']);
    expect(JSON.parse(shown.stdout).calls).toHaveLength(2);
    const one = JSON.parse((await run({ naive: true }, ['export', 'ep-full-99'])).stdout) as EpisodeExport;
    expect(one).toMatchObject({ mode: 'naive', episode: { id: 'ep-full-99' } });
    await expect(run({}, ['show', 'nope'])).rejects.toMatchObject({ name: 'EpisodeNotFoundError' });
  });

  it('exports every selected episode as JSONL, to stdout or a whole file', async () => {
    const all = (await run({ all: true }, ['export'])).stdout.trim().split('\n');
    expect(all).toHaveLength(EPISODES + 1);
    const out = join(tempDir(), 'window.jsonl');
    const window = await run(
      { all: true, model: 'tiny', from: '2026-01-01T00:00:10Z', before: '2026-01-01T00:00:20Z', state: 'ended,trained', out },
      ['export'],
    );
    expect(window.code).toBe(0);
    const ids = readFileSync(out, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as EpisodeExport).episode.id);
    expect(ids).toEqual(['ep-012', 'ep-014', 'ep-016', 'ep-018']);
    expect(existsSync(`${out}.partial`)).toBe(false);
  });

  it.each([
    [{ sort: 'sideways' }, ['list']],
    [{ state: 'ended,exploded' }, ['list']],
    [{ kind: 'both' }, ['list']],
    [{ version: '-1' }, ['list']],
    [{ version: 'v2' }, ['list']],
    [{ limit: '0' }, ['list']],
    [{ limit: '501' }, ['list']],
    [{ from: '2026-01-01' }, ['list']],
    [{ client: '' }, ['list']],
    [{ all: true, from: 'yesterday' }, ['export']],
    [{ all: true, before: '2026-02-30T25:00:00Z' }, ['export']],
    [{ all: true, step: '3' }, ['export']],
    [{ all: true, model: 'tiny', step: 'three' }, ['export']],
    [{ all: true, sort: 'newest' }, ['export']],
    [{ all: true }, ['export', 'ep-001']],
    [{}, ['export']],
    [{ model: 'tiny' }, ['show', 'ep-001']],
    [{}, ['list', 'extra']],
    [{}, ['frobnicate']],
  ])('refuses %j %j as a usage error', async (args, positionals) => {
    await expect(run(args, positionals)).rejects.toMatchObject({ name: 'UsageError' });
  });

  it('reads the store when control.json names a process that is gone (a peer killed with -9)', () => {
    const stale = tempDir();
    seedStore(stale);
    const gone = spawnSync(process.execPath, ['-e', 'process.pid']).pid;
    writeFileSync(dataPaths(stale).control, JSON.stringify({ pid: gone, token: 't', urls: { api: 'http://127.0.0.1:9/api' } }));
    expect(peerOrOffline(stale).kind).toBe('offline');
  });

  it('names the data dir it looked at when there is neither peer nor store', () => {
    const empty = tempDir();
    expect(() => peerOrOffline(empty)).toThrow(expect.objectContaining({ name: 'NoPeerDataError', dataDir: empty }));
    expect(() => openOfflineStore(empty)).toThrow(expect.objectContaining({ name: 'NoPeerDataError' }));
  });
});

describe('the agentjet CLI process', () => {
  it('exits 0 offline, 1 with NoPeerDataError for an empty data dir (also from AGENTJET_DATA_DIR), 2 for a bad flag', async () => {
    const offline = await runCli(['episodes', 'list', '--data-dir', dataDir, '--version', '2']);
    expect(offline.code).toBe(0);
    expect(offline.stdout).toContain('ep-029');

    const empty = tempDir();
    const neither = await runCli(['episodes', 'list'], { AGENTJET_DATA_DIR: empty });
    expect(neither.code).toBe(1);
    expect(neither.stderr).toContain('NoPeerDataError');
    expect(neither.stderr).toContain(empty);

    expect((await runCli(['episodes', 'list', '--data-dir', dataDir, '--sort', 'sideways'])).code).toBe(2);
  });

  describe('with a peer running on the data dir', () => {
    let peer: PeerProcess;
    let liveDir: string;
    beforeAll(async () => {
      liveDir = tempDir();
      seedStore(liveDir);
      peer = await startPeerProcess(['node', '--port', '0', '--data-dir', liveDir]);
    });
    afterAll(async () => {
      await peer?.stop();
    });

    it('asks the peer: list with filters, export --all streamed to stdout and to a file', async () => {
      expect(peerOrOffline(liveDir).kind).toBe('peer');
      const list = await runCli(['episodes', 'list', '--data-dir', liveDir, '--client', 'c2', '--sort', 'reward-asc', '--json']);
      expect(list.code).toBe(0);
      const page = JSON.parse(list.stdout) as EpisodePage;
      expect(page.episodes.every((e) => e.client === 'c2')).toBe(true);
      expect(page.episodes.at(-1)?.reward).toBeNull();

      const exported = await runCli(['episodes', 'export', '--all', '--data-dir', liveDir, '--model', 'big', '--version', '0']);
      expect(exported.code).toBe(0);
      expect(exported.stdout.trim().split('\n').map((line) => (JSON.parse(line) as EpisodeExport).episode.id)).toEqual([
        'ep-001',
        'ep-003',
        'ep-005',
        'ep-007',
        'ep-009',
      ]);
      const out = join(tempDir(), 'all.jsonl');
      expect((await runCli(['episodes', 'export', '--all', '--data-dir', liveDir, '--out', out])).code).toBe(0);
      expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(EPISODES + 1);
    });
  });
});
