import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseReadyLine } from '../swarm/node/cli/peer-process.ts';
import { startPeerProcess } from './peer-process.ts';

const READY = { event: 'ready', port: 7420, apiUrl: 'a', gatewayUrl: 'g', uiUrl: 'http://127.0.0.1:7420/#token=t', token: 't', dataDir: '/d', nodeId: 'n' };

describe('parseReadyLine', () => {
  it('accepts the ready event and ignores every other line', () => {
    expect(parseReadyLine(JSON.stringify(READY))).toEqual(READY);
    expect(parseReadyLine('[info] peer started')).toBeNull();
    expect(parseReadyLine('{"event":"log"}')).toBeNull();
    expect(parseReadyLine('{not json')).toBeNull();
    expect(parseReadyLine(JSON.stringify({ ...READY, port: '7420' }))).toBeNull();
  });
});

describe('startPeerProcess', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  /** A stand-in app root whose `bin/agentjet.mjs` is a tiny real script (the real peer is covered by e2e/). */
  function appWith(script: string): string {
    const root = mkdtempSync(path.join(tmpdir(), 'agentjet-peerproc-'));
    dirs.push(root);
    mkdirSync(path.join(root, 'bin'));
    writeFileSync(path.join(root, 'bin', 'agentjet.mjs'), script);
    return root;
  }

  it('resolves with the ready line, passes the arguments, and stops the process', async () => {
    // The SIGTERM handler is in place before the ready line: a stop that follows it at once still exits with 0.
    const root = appWith(`
      process.on('SIGTERM', () => process.exit(0));
      console.error('[info] starting with ' + process.argv.slice(2).join(' '));
      console.log(${JSON.stringify(JSON.stringify(READY))});
      setInterval(() => {}, 1000);
    `);
    const peer = await startPeerProcess({ appRoot: root, execPath: process.execPath, dataDir: '/data', port: 0 });
    expect(peer.uiUrl).toBe(READY.uiUrl);
    // stderr and stdout are separate pipes: the log line may land just after the ready line.
    await expect.poll(() => peer.stderr()).toContain('starting with node --port 0 --data-dir /data --json');
    await peer.stop();
    expect(peer.child.exitCode).toBe(0);
    await peer.stop(); // twice is fine
  });

  it('fails with PeerStartError and the stderr when the peer exits before it is ready', async () => {
    const root = appWith(`console.error('cannot open the database'); process.exit(3);`);
    const error = await startPeerProcess({ appRoot: root, execPath: process.execPath }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'PeerStartError' });
    expect((error as Error).message).toContain('cannot open the database');
  });
});
