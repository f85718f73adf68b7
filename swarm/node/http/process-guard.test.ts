import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('./testing/guarded-peer.ts', import.meta.url));
let child: ChildProcess | undefined;

afterAll(() => {
  child?.kill('SIGKILL');
});

/** Starts the guarded server in its own process (an unhandled rejection here would fail vitest, not test it). */
async function startGuardedPeer(): Promise<{ port: number; child: ChildProcess }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  child = proc;
  let out = '';
  proc.stdout!.setEncoding('utf8');
  const ready = new Promise<number>((resolve, reject) => {
    proc.stdout!.on('data', (chunk: string) => {
      out += chunk;
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve((JSON.parse(line) as { port: number }).port);
    });
    proc.once('exit', (code) => reject(new Error(`guarded peer exited with ${code} before it listened`)));
  });
  return { port: await ready, child: proc };
}

describe('installProcessGuard', () => {
  it('logs an unhandled rejection and an uncaught exception, and the peer keeps serving', async () => {
    const peer = await startGuardedPeer();
    const res = await fetch(`http://127.0.0.1:${peer.port}/api/stray`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ caught: 2 });
    // Still alive and answering after both.
    expect((await fetch(`http://127.0.0.1:${peer.port}/api/nothing-here`)).status).toBe(404);
    expect(peer.child.exitCode).toBeNull();
    peer.child.kill('SIGTERM');
    await once(peer.child, 'exit');
  }, 30_000);
});
