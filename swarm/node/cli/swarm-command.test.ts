/** `agentjet swarm create|join` and `agentjet peers`, through the real CLI. */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parseSwarmToken } from '../../../p2p/index.ts';
import { runCli, startPeerProcess } from '../cli/peer-process.ts';
import { main } from './main.ts';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-swarm-cli-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function mainOutput(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const out = vi
    .spyOn(process.stdout, 'write')
    .mockImplementation((chunk) => ((stdout += String(chunk)), true));
  const err = vi
    .spyOn(process.stderr, 'write')
    .mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    return { code: await main(argv), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe('agentjet swarm and peers', () => {
  it('creates a swarm token, stores it privately, and refuses a malformed token to join', async () => {
    const dataDir = tempDir();
    const created = await mainOutput([
      'swarm',
      'create',
      '--name',
      'bio-lab',
      '--json',
      '--data-dir',
      dataDir,
    ]);
    expect(created.code).toBe(0);
    const { token, stored } = JSON.parse(created.stdout) as { token: string; stored: string };
    expect(parseSwarmToken(token).name).toBe('bio-lab');
    expect(JSON.parse(readFileSync(stored, 'utf8'))).toEqual({ token });
    expect(statSync(stored).mode & 0o077).toBe(0);

    const other = tempDir();
    const joined = await mainOutput(['swarm', 'join', token, '--json', '--data-dir', other]);
    expect(joined.code).toBe(0);
    expect(JSON.parse(joined.stdout)).toMatchObject({ swarm: 'bio-lab' });

    const bad = await mainOutput(['swarm', 'join', 'not-a-token', '--data-dir', tempDir()]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('InvalidSwarmTokenError');
    expect((await mainOutput(['swarm', 'leave', '--data-dir', other])).code).toBe(2);
  });

  it('starts a joined peer in its swarm and lists it with agentjet peers', async () => {
    const dataDir = tempDir();
    expect((await mainOutput(['swarm', 'create', '--name', 'cli-lab', '--data-dir', dataDir])).code).toBe(0);
    const peer = await startPeerProcess([
      'node',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
      '--log-level',
      'silent',
    ]);
    try {
      const ready = peer.ready as unknown as { p2p: { swarm: string; peerId: string } | null };
      expect(ready.p2p).toMatchObject({ swarm: 'cli-lab' });
      const listed = await runCli(['peers', '--json', '--data-dir', dataDir]);
      expect(listed.code).toBe(0);
      const answer = JSON.parse(listed.stdout) as {
        swarm: string;
        peers: { peerId: string; self: boolean }[];
      };
      expect(answer.swarm).toBe('cli-lab');
      expect(answer.peers).toContainEqual(expect.objectContaining({ peerId: ready.p2p!.peerId, self: true }));
    } finally {
      await peer.stop();
    }
  });
});
