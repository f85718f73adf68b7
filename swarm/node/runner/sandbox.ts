/**
 * The boundary around an agent script. On Linux with bubblewrap (`bwrap` on PATH, able to create namespaces) a
 * run is a sandbox: its own mount, PID, IPC and UTS namespaces in which the script sees only its work dir
 * (writable), its snapshot (read-only), the interpreter and the system's libraries (read-only), a private /tmp,
 * /dev and /proc — no data dir, no other episode, no process of the peer. It dies with the runner
 * (`--die-with-parent`), cannot reach the terminal (`--new-session`: no TIOCSTI), and everything it started dies
 * with its PID namespace at the time limit. Resource limits (memory, CPU, processes, file size) are set
 * with util-linux's `prlimit` inside the sandbox (memory as RLIMIT_DATA, see DEFAULT_MEMORY_MB).
 *
 * Anywhere else (no bubblewrap, macOS, Windows) the in-process guards of script.ts stay (Node's permission model,
 * python-guard.py) and rlimits apply where `prlimit` exists; the script then runs as the peer's user and can read
 * what that user can, which the isolation detail says plainly.
 *
 * The process limit (RLIMIT_NPROC) counts per user. A non-root peer runs the sandbox in a user namespace of its
 * own, where the count is the sandbox's (Linux ≥ 5.14). The kernel never enforces it for root, so a root peer
 * runs each sandbox as an unprivileged uid of its own (SANDBOX_UID_BASE + a slot), which also keeps one run's
 * files and processes out of another's reach.
 */
import { execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { accessSync, constants as fsConstants, realpathSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import type { RunnerIsolation, ScriptLimits } from '../../common/runner-api.ts';
import { ScriptAttachError } from './errors.ts';
import { chownTree, parents, pythonPrefixes, readOnly, systemMounts } from './sandbox-mounts.ts';
import type { ProcessResult } from './process.ts';
import { launchCommand, type ScriptVersion } from './script.ts';

/**
 * Memory of each process when the client sets none: a runaway allocation fails inside the agent, not on the
 * peer's machine. It is RLIMIT_DATA (private writable memory: heap, buffers, Python objects, thread stacks), not
 * RLIMIT_AS: V8 reserves about 10 GiB of address space per WebAssembly memory (guard regions, never touched), so
 * an address-space limit low enough to matter breaks Node's Wasm — tsx's own lexer among it.
 */
export const DEFAULT_MEMORY_MB = 4096;
/** Processes and threads per sandbox: Node alone runs about a dozen threads; a fork bomb stops here. */
export const DEFAULT_PROCESSES = 256;
/** Largest file a script may write: enough for outputs and caches, not enough to fill the peer's disk in one go. */
export const DEFAULT_FILE_SIZE_MB = 1024;
/**
 * CPU seconds per process when the client sets none, per second of its time limit: a process may keep two
 * cores busy for the whole run (the wall-clock limit stops it anyway); a spinning process with many threads is
 * stopped sooner.
 */
export const DEFAULT_CPU_S_PER_TIME_LIMIT_S = 2;
/**
 * The CPU priority (nice) an agent's processes run at, below the peer's: agents mostly wait on the model, and the
 * peer's engines (the trainer's step, the sampler's decoding) are what every agent waits on. Measured (issue #20,
 * `npm run bench -- async`): with asynchronous training a step runs while the gate lets the next batch of agents
 * start, a Node agent costs ~0.2 s of CPU to start, and the trainer's thread spent 3.5–4.3 s of a 4.6–5.6 s step
 * runnable but waiting for a core (its schedstat run delay) for 0.25–0.36 s of CPU; a synchronous step, with no
 * agent running, took 0.4–0.7 s. With agents at 10, the same run's steps took 0.56–1.08 s (2 cores, load 10–19).
 * At 10 an agent weighs about a tenth of a peer thread (the kernel's nice weights: 1024 at 0, 110 at 10) and still
 * gets every core the peer leaves idle.
 */
export const AGENT_NICE = 10;
/** Probing bubblewrap once (`bwrap --ro-bind / / true`) takes milliseconds; this bounds a hung probe. */
const PROBE_TIMEOUT_MS = 10_000;
/**
 * A root peer runs each sandbox as uid SANDBOX_UID_BASE + slot: far above any account a distribution creates
 * (and below 2^31, which some tools treat as negative), one uid per run in flight so that their process counts
 * and files stay apart.
 */
export const SANDBOX_UID_BASE = 1_900_000_000;
/** Slots for sandbox uids: far more than runs in flight, so that peers picking at random rarely share one. */
const SANDBOX_UID_SLOTS = 65_536;

export type NetworkMode = 'on' | 'none';

export interface RunLimits {
  memoryMb: number;
  cpuS: number;
  processes: number;
  fileSizeMb: number;
}

/** The limits a run gets: the client's where it set them, the defaults elsewhere. */
export function resolveLimits(limits: ScriptLimits | undefined, timeLimitS: number): RunLimits {
  return {
    memoryMb: limits?.memoryMb ?? DEFAULT_MEMORY_MB,
    cpuS: limits?.cpuS ?? Math.ceil(timeLimitS * DEFAULT_CPU_S_PER_TIME_LIMIT_S),
    processes: limits?.processes ?? DEFAULT_PROCESSES,
    fileSizeMb: limits?.fileSizeMb ?? DEFAULT_FILE_SIZE_MB,
  };
}

export interface SandboxRun {
  script: ScriptVersion;
  workDir: string;
  /** The peer's data directory: off limits (the fallback guards need it; the sandbox simply does not mount it). */
  dataDir: string;
  limits: RunLimits;
  network: NetworkMode;
}

/** One run's command line, and what to undo after it. */
export interface PreparedRun {
  command: string;
  args: string[];
  /** The script's end as the script ended, where the launcher reports it its own way. */
  settle(result: ProcessResult): ProcessResult;
  release(): void;
}

/**
 * bubblewrap exits 128 + N when the script died of signal N (as shells do): read back as the signal, so a crash is
 * a crash (a script that itself exits 128 + N reads the same, as under a shell).
 */
export function signalFromExitCode(result: ProcessResult): ProcessResult {
  if (result.signal !== null || result.exitCode === null || result.exitCode <= 128) return result;
  const number = result.exitCode - 128;
  const name = Object.entries(constants.signals).find(([, n]) => n === number)?.[0] as NodeJS.Signals | undefined;
  return name ? { ...result, exitCode: null, signal: name } : result;
}

const asIs = (result: ProcessResult) => result;

export interface Sandbox {
  readonly isolation: RunnerIsolation;
  /** Whether `network: 'none'` can be honoured. */
  readonly cutsNetwork: boolean;
  /** The command line for one run (and its work dir made the sandbox user's when that differs). */
  prepare(run: SandboxRun): PreparedRun;
}

/** Where an executable is on PATH, or undefined. */
function onPath(name: string): string | undefined {
  if (process.platform === 'win32') return undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * `command args` run at AGENT_NICE, on Linux: every agent has a session of its own (bubblewrap's `--new-session`,
 * or the runner's detached spawn), and under autogroup scheduling (most Linux desktops) the kernel shares the CPU
 * between sessions before it looks at a process's nice. So the shell first lowers its session's weight
 * (/proc/self/autogroup; a kernel without autogroups has no such file, and nothing is said), then runs the command
 * under `nice`, for kernels that weigh processes alone. Elsewhere (or without sh and nice) the command as it is.
 */
export function atAgentPriority(launch: { command: string; args: string[] }): { command: string; args: string[] } {
  const tools = agentPriorityTools();
  if (!tools) return launch;
  const script = `{ echo ${AGENT_NICE} > /proc/self/autogroup; } 2>/dev/null; exec "$0" -n ${AGENT_NICE} "$@"`;
  return { command: tools.sh, args: ['-c', script, tools.nice, launch.command, ...launch.args] };
}

let priorityTools: { sh: string; nice: string } | null | undefined;

/** sh and nice on PATH (Linux), found once. */
function agentPriorityTools(): { sh: string; nice: string } | null {
  if (priorityTools !== undefined) return priorityTools;
  const sh = process.platform === 'linux' ? onPath('sh') : undefined;
  const nice = process.platform === 'linux' ? onPath('nice') : undefined;
  priorityTools = sh && nice ? { sh, nice } : null;
  return priorityTools;
}

let host: Sandbox | undefined;

/** This machine's sandbox, found once: bubblewrap when it works here, the in-process guards otherwise. */
export function hostSandbox(): Sandbox {
  host ??= detectSandbox();
  return host;
}

export function detectSandbox(): Sandbox {
  const prlimit = process.platform === 'linux' ? onPath('prlimit') : undefined;
  if (process.platform !== 'linux') return guardsOnly(`scripts are not isolated on ${process.platform}: bubblewrap is Linux-only`, prlimit);
  const bwrap = onPath('bwrap');
  if (!bwrap) return guardsOnly('scripts are not isolated: bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt install bubblewrap)', prlimit);
  const root = process.getuid?.() === 0;
  const failure = probeBubblewrap(bwrap, root);
  if (failure) return guardsOnly(`scripts are not isolated: bubblewrap cannot create namespaces here (${failure})`, prlimit);
  const setpriv = root ? onPath('setpriv') : undefined;
  if (!prlimit || (root && !setpriv)) {
    const missing = !prlimit ? 'prlimit' : 'setpriv';
    return guardsOnly(`scripts are not isolated: bubblewrap works but util-linux's ${missing} is missing, so no resource limits could be set`, prlimit);
  }
  return new Bubblewrap(bwrap, prlimit, setpriv);
}

/**
 * The namespaces of every sandbox. A root peer keeps the initial user namespace: it changes to the run's uid
 * inside, which a user namespace mapping only root would forbid; anyone else gets a user namespace of their own.
 */
function namespaceArgs(root: boolean): string[] {
  return [
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(root ? ['--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID'] : ['--unshare-user']),
  ];
}

/** Why bubblewrap cannot run a sandbox here (tried once with the real namespaces), or undefined when it can. */
export function probeBubblewrap(bwrap: string, root: boolean): string | undefined {
  try {
    execFileSync(bwrap, [...namespaceArgs(root), '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', 'true'], { stdio: ['ignore', 'ignore', 'pipe'], timeout: PROBE_TIMEOUT_MS });
    return undefined;
  } catch (err) {
    const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
    return stderr.split('\n').at(-1) || (err as Error).message;
  }
}

/** No sandbox: the in-process guards of script.ts, and rlimits where prlimit exists. */
export function guardsOnly(why: string, prlimit: string | undefined = process.platform === 'linux' ? onPath('prlimit') : undefined): Sandbox {
  const root = process.getuid?.() === 0;
  const limits = prlimit
    ? root
      ? 'Memory, CPU and file-size limits apply; the process limit does not (the kernel does not enforce it for root).'
      : 'Memory, CPU, process and file-size limits apply (the process limit counts all of the user’s processes).'
    : 'No resource limits apply.';
  const detail =
    `${why}. A script runs as the peer's user and can read and write what that user can: the guards (Node's ` +
    `permission model, an audit hook for Python) are no boundary. ${limits} Run only scripts you trust.`;
  return {
    isolation: { kind: 'none', detail },
    cutsNetwork: false,
    prepare(run) {
      const launch = launchCommand(run.script, { workDir: run.workDir, sandbox: true, dataDir: run.dataDir });
      const limited = prlimit ? { command: prlimit, args: [...prlimitArgs(run.limits), '--', launch.command, ...launch.args] } : launch;
      // sh, nice and prlimit each exec the next: the script's end is its own.
      return { ...atAgentPriority(limited), settle: asIs, release() {} };
    },
  };
}

function prlimitArgs(limits: RunLimits): string[] {
  const mib = 1024 * 1024;
  return [
    `--data=${limits.memoryMb * mib}`,
    // Soft then hard: SIGXCPU at the limit, SIGKILL a second later for a process that ignores it.
    `--cpu=${limits.cpuS}:${limits.cpuS + 1}`,
    `--nproc=${limits.processes}`,
    `--fsize=${limits.fileSizeMb * mib}`,
  ];
}

const usedUids = new Set<number>();

/** Where this process starts looking for a free slot: at random, so two root peers on a machine rarely meet. */
const FIRST_SLOT = randomInt(SANDBOX_UID_SLOTS);

function takeUid(): number {
  for (let i = 0; i < SANDBOX_UID_SLOTS; i++) {
    const uid = SANDBOX_UID_BASE + ((FIRST_SLOT + i) % SANDBOX_UID_SLOTS);
    if (!usedUids.has(uid)) {
      usedUids.add(uid);
      return uid;
    }
  }
  throw new ScriptAttachError('no sandbox uid left: too many runs in flight');
}

class Bubblewrap implements Sandbox {
  readonly isolation: RunnerIsolation;
  readonly cutsNetwork = true;
  private readonly root: boolean;

  constructor(
    private readonly bwrap: string,
    private readonly prlimit: string,
    private readonly setpriv: string | undefined,
  ) {
    this.root = setpriv !== undefined;
    this.isolation = {
      kind: 'bubblewrap',
      detail:
        'Scripts run in a bubblewrap sandbox: they see only their work dir (writable), their snapshot and the ' +
        'system read-only, their own /proc and /tmp; not the data dir, other episodes or the peer’s processes. ' +
        `Memory, CPU, process and file-size limits apply${this.root ? '; each run has an unprivileged uid of its own' : ''}. ` +
        'The network is on unless a client asks for none.',
    };
  }

  prepare(run: SandboxRun): PreparedRun {
    // Inside the sandbox the boundary is the namespace: the script runs as it would unsandboxed (child processes
    // allowed), with the work dir and snapshot at the same paths as outside.
    const launch = launchCommand(run.script, { workDir: run.workDir, sandbox: false, dataDir: run.dataDir });
    const uid = this.root ? takeUid() : undefined;
    try {
      if (uid !== undefined) chownTree(run.workDir, uid);
    } catch (err) {
      usedUids.delete(uid!);
      throw err;
    }
    // Inside the sandbox's session: its weight is the one to lower (atAgentPriority).
    const inside = atAgentPriority({
      command: uid !== undefined ? this.setpriv! : this.prlimit,
      args: [
        ...(uid !== undefined ? [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--no-new-privs', this.prlimit] : []),
        ...prlimitArgs(run.limits),
        '--',
        launch.command,
        ...launch.args,
      ],
    });
    const args = [
      '--die-with-parent',
      '--new-session',
      ...namespaceArgs(this.root),
      ...(run.network === 'none' ? ['--unshare-net'] : []),
      '--proc', '/proc',
      '--dev', '/dev',
      '--tmpfs', '/tmp',
      ...systemMounts(),
      ...readOnly(this.readPaths(run, launch.command)),
      ...parents([run.workDir]),
      '--bind', run.workDir, run.workDir,
      '--chdir', run.workDir,
      '--',
      inside.command,
      ...inside.args,
    ];
    return { command: this.bwrap, args, settle: signalFromExitCode, release: () => void (uid !== undefined && usedUids.delete(uid)) };
  }

  /** What the script needs to read besides the system: its snapshot, its packages, its interpreter. */
  private readPaths(run: SandboxRun, interpreter: string): string[] {
    const snapshot = dirname(run.script.file);
    const priority = agentPriorityTools();
    const paths = [snapshot, join(snapshot, 'node_modules'), this.prlimit, ...(this.setpriv ? [this.setpriv] : []), ...(priority ? [priority.sh, priority.nice] : [])];
    if (run.script.runtime === 'python') paths.push(...pythonPrefixes());
    // Node (or Electron running as Node) with the files beside its binary.
    else paths.push(dirname(realpathSync(interpreter)));
    return paths;
  }
}

/** Refuses options this runner cannot honour (network: none without a sandbox that can cut it). */
export function checkSandboxOptions(sandbox: Sandbox, options: { sandbox: boolean; network?: NetworkMode }) {
  if (options.network !== 'none') return;
  if (!options.sandbox) throw new ScriptAttachError('network: "none" needs sandbox: true');
  if (!sandbox.cutsNetwork) throw new ScriptAttachError(`network: "none" cannot be honoured here: ${sandbox.isolation.detail}`);
}
