/**
 * The launcher (launcher.ts): runs go through a process of their own and come back as runProcess would answer them;
 * an abort reaches the run there; a launcher that dies under a run ends it aborted, kills its process group, and
 * the next run starts another. Real processes.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcessLauncher } from './launcher.ts';
import type { ProcessSpec } from './process.ts';

/** Past the test timeout (vitest.config.ts, 120 s): a process that ends on its own did not end because it was stopped. */
const HOLD_MS = 600_000;

const launchers: ProcessLauncher[] = [];
afterEach(async () => {
  for (const launcher of launchers.splice(0)) await launcher.close();
});

function launcher(): ProcessLauncher {
  const made = new ProcessLauncher();
  launchers.push(made);
  return made;
}

function node(code: string, extra: Partial<ProcessSpec> = {}): ProcessSpec {
  return { command: process.execPath, args: ['-e', code], cwd: process.cwd(), env: { PATH: process.env.PATH ?? '' }, timeLimitMs: HOLD_MS * 2, outputIdleMs: 0, ...extra };
}

/** The pid's state letter from /proc (Linux), or undefined once the process is reaped. */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Resolves once the process is dead (gone, or a zombie left for its new parent to reap); only the test's timeout bounds it. */
async function dead(pid: number): Promise<void> {
  while (procStat(pid) !== undefined && procStat(pid)?.[0] !== 'Z') await new Promise((resolve) => setTimeout(resolve, 20));
}

/** Resolves with the first pid the run reports through onSpawn. */
function spawned(): { onSpawn: (pid: number) => void; pid: Promise<number> } {
  const { promise, resolve } = Promise.withResolvers<number>();
  return { onSpawn: resolve, pid: promise };
}

describe('ProcessLauncher', () => {
  it('runs processes from one launcher process, answering as runProcess does', async () => {
    const runs = launcher();
    const started = spawned();
    const first = await runs.run(node("console.log('partial'); console.error('to stderr'); console.log(JSON.stringify({ ppid: process.ppid })); process.exit(3)", { onSpawn: started.onSpawn }));
    expect(first.exitCode).toBe(3);
    expect(first.killedFor).toBe(null);
    expect(first.stderr).toBe('to stderr\n');
    expect(first.stdout.startsWith('partial\n')).toBe(true);
    const { ppid } = JSON.parse(first.lastLine) as { ppid: number };
    // Started by the launcher, not by this process.
    expect(ppid).not.toBe(process.pid);
    expect(await started.pid).toBeGreaterThan(0);
    const second = await runs.run(node('console.log(JSON.stringify({ ppid: process.ppid }))'));
    expect(JSON.parse(second.lastLine)).toEqual({ ppid });
    expect(runs.started).toBe(1);
  });

  it('passes an abort on to the run, with its reason', async () => {
    const runs = launcher();
    const controller = new AbortController();
    const started = spawned();
    const running = runs.run(node(`setTimeout(() => {}, ${HOLD_MS})`, { signal: controller.signal, onSpawn: started.onSpawn }));
    await started.pid;
    controller.abort('replaced by a new version');
    const result = await running;
    expect(result.killedFor).toBe('aborted');
    expect(result.abortReason).toBe('replaced by a new version');
  });

  it.skipIf(process.platform !== 'linux')('ends a run aborted when its launcher dies, kills its group, and starts another launcher for the next run', async () => {
    const runs = launcher();
    const started = spawned();
    const running = runs.run(node(`setTimeout(() => {}, ${HOLD_MS})`, { onSpawn: started.onSpawn }));
    const pid = await started.pid;
    // The launcher is the script's parent (its output would come only with its result).
    const launcherPid = Number(procStat(pid)![1]);
    expect(launcherPid).not.toBe(process.pid);
    process.kill(launcherPid, 'SIGKILL');
    const result = await running;
    expect(result.killedFor).toBe('aborted');
    expect(result.abortReason).toMatch(/^the agent launcher exited/);
    await dead(pid);
    const next = await runs.run(node("console.log('again')"));
    expect(next.lastLine).toBe('again');
    expect(runs.started).toBe(2);
  });
});
