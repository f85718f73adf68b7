import { mkdtempSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, startPeerProcess, type PeerProcess } from '../cli/peer-process.ts';

const tempDir = () => mkdtempSync(join(tmpdir(), 'agentjet-cli-'));
const running: PeerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

describe('agentjet CLI', () => {
  it('prints the version and the help', async () => {
    const version = await runCli(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);

    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('agentjet <command>');
    expect(help.stdout).toContain('node');
  });

  it('rejects an unknown flag with usage and exit code 2', async () => {
    const result = await runCli(['node', '--frobnicate']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("'--frobnicate'");
    expect(result.stderr).toContain('Usage: agentjet node');
  });

  it('rejects a bad port value with exit code 2', async () => {
    const result = await runCli(['node', '--port', 'seventy']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--port must be a whole number');
  });

  it('rejects an unknown command with exit code 2', async () => {
    const result = await runCli(['frobnicate']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unknown command "frobnicate"');
  });

  it('explains a busy port and how to pick another', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await runCli(['node', '--port', String(port), '--data-dir', tempDir()]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`port ${port}`);
      expect(result.stderr).toContain('--port');
    } finally {
      blocker.close();
    }
  });

  it('runs a headless peer that serves its status and stops cleanly on SIGTERM', async () => {
    const dataDir = tempDir();
    const peer = await startPeerProcess(['node', '--port', '0', '--data-dir', dataDir]);
    running.push(peer);
    expect(peer.ready.uiUrl).toContain(`#token=${peer.ready.token}`);

    const res = await fetch(`${peer.ready.apiUrl}/status`, { headers: { authorization: `Bearer ${peer.ready.token}` } });
    expect(res.status).toBe(200);
    const status = (await res.json()) as { nodeId: string; dataDir: string };
    expect(status.nodeId).toBe(peer.ready.nodeId);
    expect(status.dataDir).toBe(dataDir);
    expect(existsSync(join(dataDir, 'agentjet.sqlite'))).toBe(true);

    expect(await peer.stop()).toBe(0);
    expect(existsSync(join(dataDir, 'control.json'))).toBe(false);
  });

  it('keeps the node identity across restarts', async () => {
    const dataDir = tempDir();
    const first = await startPeerProcess(['node', '--port', '0', '--data-dir', dataDir]);
    await first.stop();
    const second = await startPeerProcess(['node', '--port', '0', '--data-dir', dataDir]);
    running.push(second);
    expect(second.ready.nodeId).toBe(first.ready.nodeId);
  });
});
