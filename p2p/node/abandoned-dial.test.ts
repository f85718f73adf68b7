/** A dial the peer gave up must not crash it when the abandoned connection fails later. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const script = fileURLToPath(new URL('../testing/abandoned-dial-process.ts', import.meta.url));

it('a WebSockets dial given up before the upgrade is answered, then cut by the other side, leaves the peer running', async () => {
  // In a child process: an uncaught exception there ends it with a non-zero code, which execFile rejects with.
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script]);
  const result = JSON.parse(stdout.trim().split('\n').pop() as string) as { dialError: string; connectionsHeld: number };
  expect(result.connectionsHeld).toBe(1);
  expect(result.dialError).not.toBe('connected');
}, 60_000);
