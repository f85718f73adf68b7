/**
 * runProcess against a detached grandchild (the hardening issue's finding): a grandchild that calls setsid and
 * keeps the output pipes open must not hold the run past its limit, nor past its main process's exit — here
 * without any sandbox, where the grandchild survives outside the process group and only letting go of the pipes
 * helps.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { PIPE_DRAIN_MS, runProcess } from './process.ts';

/** The grandchild holds the pipes this long: far past every bound below, so a run that waits for it fails. */
const HOLD_MS = 30_000;
/** Slack for a busy machine on top of the bounds the runner promises (spawn, timers, a loaded CI box). */
const SLACK_MS = 2_000;
/** The main process's time limit in the first case. */
const TIME_LIMIT_MS = 1_500;
/** runProcess's SIGTERM → SIGKILL grace (process.ts TERM_GRACE_MS). */
const TERM_GRACE_MS = 500;

const grandchildren: number[] = [];
afterEach(() => {
  for (const pid of grandchildren.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
});

/** A Node main that starts a setsid'd grandchild sharing its stdout/stderr, prints its pid, then `then`. */
function mainWithGrandchild(then: string): string[] {
  const code = `
    const { spawn } = require('node:child_process');
    const g = spawn(process.execPath, ['-e', 'setTimeout(() => {}, ${HOLD_MS})'], { detached: true, stdio: ['ignore', 'inherit', 'inherit'] });
    g.unref();
    console.log('grandchild ' + g.pid);
    ${then}`;
  return ['-e', code];
}

function run(args: string[], timeLimitMs: number) {
  return runProcess({ command: process.execPath, args, cwd: process.cwd(), env: { PATH: process.env.PATH ?? '' }, timeLimitMs, outputIdleMs: 0 });
}

function remember(stdout: string) {
  const pid = Number(/grandchild (\d+)/.exec(stdout)?.[1]);
  if (pid > 0) grandchildren.push(pid);
}

describe('a setsid grandchild holding the output pipes', () => {
  it('does not hold the run past its time limit', async () => {
    const result = await run(mainWithGrandchild('setInterval(() => {}, 1000);'), TIME_LIMIT_MS);
    remember(result.stdout);
    expect(result.killedFor).toBe('time-limit');
    expect(result.durationMs).toBeLessThan(TIME_LIMIT_MS + TERM_GRACE_MS + PIPE_DRAIN_MS + SLACK_MS);
  });

  it('does not hold the run once the main process exited with its result', async () => {
    const result = await run(mainWithGrandchild("console.log(JSON.stringify({ reward: 1 }));"), HOLD_MS * 2);
    remember(result.stdout);
    expect(result.killedFor).toBe(null);
    expect(result.exitCode).toBe(0);
    expect(result.lastLine).toBe('{"reward":1}');
    expect(result.durationMs).toBeLessThan(PIPE_DRAIN_MS + SLACK_MS * 2);
  });
});
