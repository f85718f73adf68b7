/**
 * Runs one agent process: detached in its own process group (so a time limit kills the whole tree, helpers the
 * script started included), with a minimal environment, its own working directory, bounded output capture,
 * a wall-clock limit and an optional output-idle limit.
 *
 * The run returns at the limit whatever the tree does: a grandchild that left the group (`setsid`) and keeps the
 * output pipes open cannot hold the run or its runner slot. Once the main process is gone the pipes get a short
 * drain, then they are let go. (Under bubblewrap such a grandchild dies with the sandbox's PID namespace; without
 * it, it lives on outside the group, which is one of the reasons the runner reports "not isolated".)
 */
import { spawn } from 'node:child_process';

/** Kept per stream: the head and the tail, so both the start-up error and the final result line survive. */
export const DEFAULT_CAPTURE_BYTES = 64 * 1024;
/** After SIGTERM the group gets this long to exit before SIGKILL. */
const TERM_GRACE_MS = 500;
/**
 * After the main process exited (or was SIGKILLed), output still in the pipes gets this long to arrive. Longer
 * only means an escaped grandchild holding the pipes keeps the slot longer; it is no wait for a healthy script,
 * whose pipes close when it exits.
 */
export const PIPE_DRAIN_MS = 1000;

export interface ProcessSpec {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeLimitMs: number;
  /** 0 = no output-idle limit. */
  outputIdleMs: number;
  captureBytes?: number;
  signal?: AbortSignal;
  /** Told the process id once it is spawned (its process group's id too). */
  onSpawn?: (pid: number) => void;
}

export type KillReason = 'time-limit' | 'output-idle' | 'aborted';

export interface ProcessResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  killedFor: KillReason | null;
  /** Why it was aborted from outside (the AbortSignal's reason), when killedFor is 'aborted'. */
  abortReason: string | null;
  stdout: string;
  stderr: string;
  /** The last non-empty stdout line, whole even when the capture was cut. */
  lastLine: string;
  spawnError: string | null;
  durationMs: number;
}

/** Keeps the first and the last `limit / 2` bytes of a stream, noting how much was dropped between. */
export class BoundedCapture {
  private head = '';
  private tail = '';
  private dropped = 0;
  constructor(private readonly limit: number) {}

  push(text: string) {
    const half = this.limit / 2;
    if (this.head.length < half) {
      const take = text.slice(0, half - this.head.length);
      this.head += take;
      text = text.slice(take.length);
    }
    if (text.length === 0) return;
    this.tail += text;
    if (this.tail.length > half) {
      this.dropped += this.tail.length - half;
      this.tail = this.tail.slice(this.tail.length - half);
    }
  }

  toString(): string {
    return this.dropped > 0 ? `${this.head}\n…[${this.dropped} chars dropped]…\n${this.tail}` : this.head + this.tail;
  }
}

/** Tracks the last complete non-empty line (bounded: a result line longer than 1 MiB is not a result). */
class LastLine {
  private partial = '';
  last = '';
  push(text: string) {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop()!.slice(-1_048_576);
    for (const line of lines) if (line.trim() !== '') this.last = line.trim();
  }
  finish(): string {
    if (this.partial.trim() !== '') this.last = this.partial.trim();
    return this.last;
  }
}

export function runProcess(spec: ProcessSpec): Promise<ProcessResult> {
  const started = performance.now();
  const captureBytes = spec.captureBytes ?? DEFAULT_CAPTURE_BYTES;
  const stdout = new BoundedCapture(captureBytes);
  const stderr = new BoundedCapture(captureBytes);
  const lastLine = new LastLine();
  return new Promise((resolve) => {
    let killedFor: KillReason | null = null;
    let abortReason: string | null = null;
    let idleTimer: NodeJS.Timeout | undefined;
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      windowsHide: true,
    });
    if (child.pid !== undefined) spec.onSpawn?.(child.pid);
    const killGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        // Windows has no process groups: taskkill /T walks the tree instead.
        if (process.platform === 'win32') spawn('taskkill', ['/pid', String(child.pid), '/T', '/F'], { stdio: 'ignore', windowsHide: true });
        else process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    const stop = (reason: KillReason) => {
      if (killedFor !== null || child.exitCode !== null) return;
      killedFor = reason;
      killGroup('SIGTERM');
      setTimeout(() => {
        killGroup('SIGKILL');
        // The main process dies of this; a grandchild that left the group may not, and must not hold the run.
        drain();
      }, TERM_GRACE_MS).unref();
    };
    const armIdle = () => {
      if (spec.outputIdleMs <= 0) return;
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => stop('output-idle'), spec.outputIdleMs);
    };
    const timeLimit = setTimeout(() => stop('time-limit'), spec.timeLimitMs);
    const onAbort = () => {
      abortReason = String(spec.signal?.reason ?? 'aborted');
      stop('aborted');
    };
    if (spec.signal?.aborted) onAbort();
    else spec.signal?.addEventListener('abort', onAbort, { once: true });
    armIdle();
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout.push(text);
      lastLine.push(text);
      armIdle();
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr.push(text);
      armIdle();
    });
    let spawnError: string | null = null;
    child.once('error', (err) => {
      spawnError = `${(err as NodeJS.ErrnoException).code ?? err.name}: ${err.message}`;
    });
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let settled = false;
    let drainTimer: NodeJS.Timeout | undefined;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timeLimit);
      clearTimeout(idleTimer);
      clearTimeout(drainTimer);
      spec.signal?.removeEventListener('abort', onAbort);
      // Let go of pipes a detached grandchild may still hold: its writes fail from now on, the run is over.
      child.stdout.destroy();
      child.stderr.destroy();
      resolve({
        exitCode: exit?.code ?? code,
        signal: exit?.signal ?? signal,
        killedFor,
        abortReason,
        stdout: stdout.toString(),
        stderr: stderr.toString(),
        lastLine: lastLine.finish(),
        spawnError,
        durationMs: performance.now() - started,
      });
    };
    /** Gives the pipes PIPE_DRAIN_MS to close once nothing of ours should be writing to them any more. */
    const drain = () => {
      if (drainTimer === undefined) drainTimer = setTimeout(() => finish(null, null), PIPE_DRAIN_MS);
    };
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      // Helpers the script left running in its group die with it; they would hold the pipes open.
      killGroup('SIGKILL');
      drain();
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => finish(code, signal));
  });
}
