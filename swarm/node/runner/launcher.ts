/**
 * Agent processes started from a small process of the peer's own (launcher-process.ts) instead of from the peer.
 * On Linux a spawn forks the spawning process: the fork copies its page tables and marks all its memory
 * copy-on-write, so the peer pays again for each page it writes afterwards, and its main thread (which answers the
 * agents' model calls) waits until the agent has exec'd. The peer holds the models (~0.5 GB in the async bench)
 * and spawns one agent per episode. Measured on 2 loaded cores: a process of 500 MB that spawns and then writes
 * its memory again spends ~115 ms of CPU per spawn against ~3 ms without the spawn; in the async bench the peer's
 * main thread sat in spawn 7.4 s of a 45 s run. The launcher is a Node process of ~50 MB, idle between spawns.
 *
 * There the run is runProcess with the same spec, and its result comes back as it is. The launcher dies with the
 * peer (its IPC channel closes and it aborts its runs). A launcher that dies first ends its runs in flight as
 * aborted (the process groups whose start it had reported killed from here; a sandbox dies with its launcher
 * anyway, bubblewrap's --die-with-parent) and the next run starts another; one that cannot start, or keeps
 * dying, leaves the runs to the peer itself (runProcess in-process, as without a launcher).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { LaunchReply, LaunchRequest } from './launcher-process.ts';
import { runProcess, type ProcessResult, type ProcessSpec } from './process.ts';
import { nodeRuntimeEnv } from './script.ts';

/** Launchers started per ProcessLauncher before runs go back in-process: one that keeps dying is not worth a fork saved. */
export const MAX_LAUNCHER_STARTS = 3;

const LAUNCHER_ENTRY = new URL('./launcher-process.ts', import.meta.url).href;

/**
 * Whether a launcher saves anything here: where spawning forks the spawner (libuv on Linux). macOS spawns with
 * posix_spawn and Windows with CreateProcess, which copy nothing of the parent.
 */
export function forkCopiesParent(): boolean {
  return process.platform === 'linux';
}

interface PendingRun {
  spec: ProcessSpec;
  resolve: (result: ProcessResult) => void;
  /** Known once the launcher reports the start. */
  pid?: number;
  detach: () => void;
}

/** Runs processes (runProcess's contract) from a launcher process, started at the first run. */
export class ProcessLauncher {
  private child: ChildProcess | undefined;
  private ready = false;
  private starts = 0;
  private closed = false;
  private nextId = 1;
  /** Requests waiting for the launcher to be ready. */
  private readonly queued: LaunchRequest[] = [];
  private readonly pending = new Map<number, PendingRun>();

  /** Launchers started so far (a restarted one counts again). */
  get started(): number {
    return this.starts;
  }

  run(spec: ProcessSpec): Promise<ProcessResult> {
    if (this.closed || this.starts >= MAX_LAUNCHER_STARTS) return runProcess(spec);
    const child = this.child ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve) => {
      // The signal and the spawn notice stay here: they cross as messages.
      const { signal, onSpawn: _onSpawn, ...plain } = spec;
      const onAbort = () => this.send({ kind: 'abort', id, reason: String(signal?.reason ?? 'aborted') });
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, { spec, resolve, detach: () => signal?.removeEventListener('abort', onAbort) });
      child.channel?.ref();
      this.send({ kind: 'run', id, spec: plain });
      if (signal?.aborted) onAbort();
    });
  }

  /** Ends the launcher (its runs aborted there, should any be left) and waits for it to be gone. */
  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    // Waited for: the process handle holds the event loop until the launcher is gone.
    child.ref();
    if (child.connected) child.disconnect();
    else child.kill('SIGKILL');
    await gone;
  }

  private send(request: LaunchRequest) {
    if (!this.ready) this.queued.push(request);
    // A launcher that went away meanwhile: its exit handler settles the run.
    else if (this.child?.connected) this.child.send(request);
  }

  private start(): ChildProcess {
    this.starts++;
    const tsx = import.meta.resolve('tsx/esm/api');
    // The same bootstrap as the engine's thread: TypeScript through tsx, then the entry.
    const bootstrap = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(LAUNCHER_ENTRY)}); });`;
    const child = spawn(process.execPath, ['--input-type=module', '--eval', bootstrap], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { ...process.env, ...nodeRuntimeEnv() },
    });
    this.child = child;
    this.ready = false;
    // Never what keeps the peer alive: only runs in flight hold the channel (run, settle).
    child.unref();
    child.on('message', (message: LaunchReply) => this.onReply(message));
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      this.ended(child, why);
    };
    child.once('error', (err) => end(`could not start: ${err.message}`));
    child.once('exit', (code, signal) => end(`exited (${signal ?? `code ${code}`})`));
    return child;
  }

  private onReply(message: LaunchReply) {
    if (message.kind === 'ready') {
      this.ready = true;
      for (const request of this.queued.splice(0)) this.send(request);
      return;
    }
    const run = this.pending.get(message.id);
    if (!run) return;
    if (message.kind === 'started') {
      run.pid = message.pid;
      run.spec.onSpawn?.(message.pid);
    } else this.settle(message.id, message.result);
  }

  private settle(id: number, result: ProcessResult) {
    const run = this.pending.get(id)!;
    this.pending.delete(id);
    run.detach();
    if (this.pending.size === 0) this.child?.channel?.unref();
    run.resolve(result);
  }

  /** The launcher is gone: runs it never got go in-process; runs it had been sent end aborted, their known groups killed. */
  private ended(child: ChildProcess, why: string) {
    if (this.child !== child) return;
    const wasReady = this.ready;
    this.child = undefined;
    this.ready = false;
    this.queued.length = 0;
    for (const [id, run] of [...this.pending]) {
      if (!wasReady) {
        this.pending.delete(id);
        run.detach();
        void runProcess(run.spec).then(run.resolve);
        continue;
      }
      if (run.pid !== undefined) killGroup(run.pid);
      this.settle(id, launcherGone(`the agent launcher ${why}`));
    }
  }
}

function killGroup(pid: number) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

/** A run whose launcher died under it: aborted, as a run stopped from outside is (not the script's failure). */
function launcherGone(reason: string): ProcessResult {
  return { exitCode: null, signal: null, killedFor: 'aborted', abortReason: reason, stdout: '', stderr: '', lastLine: '', spawnError: null, durationMs: 0 };
}
