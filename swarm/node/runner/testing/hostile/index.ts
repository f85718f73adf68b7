/**
 * Hostile agents against a real runner (the real episode routes, real child processes, this machine's sandbox or
 * one given): each attack of the hardening issue runs as one episode of attacks.py or attacks.mjs, and is judged
 * by what the runner's side can observe itself — a secret in the agent's output, a file where none may be, the
 * snapshot's hash, a signal received, how long the run held its slot — and by what the agent says it managed
 * (memory and processes, which only it can count). The sandbox tests assert none escapes; the chaos bench reports
 * the count (`runHostileAgents`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientRunRecord, ScriptLimits } from '../../../../common/runner-api.ts';
import { EpisodeApi } from '../../episode-api.ts';
import { ClientRunner } from '../../runner.ts';
import { hostSandbox, type Sandbox } from '../../sandbox.ts';
import { hashContent } from '../../script.ts';
import { startEpisodeServer, type EpisodeServer } from '../episode-server.ts';

export const PYTHON_ATTACKS = [
  'read-control', 'read-identity', 'proc-sibling', 'signal-peer', 'write-outside', 'rewrite-snapshot', 'subprocess-cat',
  'dir-fd', 'ctypes-open', 'hard-link', 'gc-deny-list', 'memory', 'fork-bomb', 'cpu-spin', 'big-file', 'setsid-grandchild',
] as const;
export const NODE_ATTACKS = [
  'read-control', 'read-identity', 'proc-sibling', 'signal-peer', 'write-outside', 'rewrite-snapshot', 'subprocess-cat',
  'hard-link', 'memory', 'setsid-grandchild',
] as const;

/** Small limits, so that going past them is quick to try (memory and file size in MiB, CPU in seconds). */
export const HOSTILE_LIMITS = { memoryMb: 512, processes: 64, cpuS: 2, fileSizeMb: 16 } satisfies ScriptLimits;
/** How long the setsid grandchild holds the output pipes (the 20 s). */
const GRANDCHILD_HOLD_S = 20;
/** The time limit of a hostile run: far below the grandchild's hold, far above an honest attack's few hundred ms. */
const HOSTILE_TIME_LIMIT_S = 8;
/** Hostile runs at once: several attacks meet in flight, as episodes do. */
const HOSTILE_CONCURRENCY = 4;

export interface AttackResult {
  /** `py:<attack>` or `js:<attack>`. */
  name: string;
  escaped: boolean;
  /** Whether the attack was really tried: the agent reported, or a limit killed it trying (not a script that broke first). */
  ran: boolean;
  /** What the agent said, or why the run was judged as it was. */
  evidence: string;
}

export interface HostileReport {
  isolation: 'bubblewrap' | 'none';
  attacks: AttackResult[];
}

interface AgentReport {
  attack: string;
  managed: boolean;
  evidence: string;
}

/** Runs every attack once, with the given sandbox (default: this machine's) and, optionally, a server to use. */
export async function runHostileReport(options: { sandbox?: Sandbox; server?: EpisodeServer } = {}): Promise<HostileReport> {
  const sandbox = options.sandbox ?? hostSandbox();
  const server = options.server ?? (await startEpisodeServer());
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-hostile-data-'));
  const outside = mkdtempSync(join(tmpdir(), 'agentjet-hostile-outside-'));
  const secrets = { node: `node-secret-${randomBytes(12).toString('hex')}`, control: `control-token-${randomBytes(12).toString('hex')}`, sibling: `sibling-key-${randomBytes(12).toString('hex')}` };
  writeFileSync(join(dataDir, 'identity.json'), JSON.stringify({ secret: secrets.node }), { mode: 0o600 });
  writeFileSync(join(dataDir, 'control.json'), JSON.stringify({ token: secrets.control }), { mode: 0o600 });
  // A sibling episode's process: its environment holds a key no other agent may see.
  const sibling = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { env: { SIBLING_KEY: secrets.sibling, OPENAI_API_KEY: secrets.sibling }, stdio: 'ignore' });
  const signals = { received: 0 };
  const onSignal = () => signals.received++;
  process.on('SIGCONT', onSignal);
  const runner = new ClientRunner({ api: new EpisodeApi(server.swarmUrl, () => server.token), dataDir, scriptsDir: join(dataDir, 'scripts'), sandbox });
  try {
    await spawned(sibling);
    const results: AttackResult[] = [];
    for (const [runtime, attacks] of [['py', PYTHON_ATTACKS], ['js', NODE_ATTACKS]] as const) {
      const file = fileURLToPath(new URL(runtime === 'py' ? './attacks.py' : './attacks.mjs', import.meta.url));
      const name = `hostile-${runtime}`;
      const task = (attack: string) => ({ id: attack, attack, dataDir, outside, siblingPid: sibling.pid, peerPid: process.pid, holdS: GRANDCHILD_HOLD_S, ...HOSTILE_LIMITS });
      await runner.attach({
        name,
        script: { content: readFileSync(file, 'utf8'), filename: runtime === 'py' ? 'attacks.py' : 'attacks.mjs' },
        tasks: { inline: attacks.map(task) },
        model: 'tiny',
        epochs: 1,
        retries: 0,
        maxConsecutiveFailures: 1000,
        concurrency: HOSTILE_CONCURRENCY,
        timeLimitS: HOSTILE_TIME_LIMIT_S,
        limits: HOSTILE_LIMITS,
      });
      await runner.settled(name);
      const runs = runner.runs(name);
      // Where script.ts put the snapshot that ran (`<scripts>/<name>/<hash prefix>/<file>`).
      const snapshot = join(dataDir, 'scripts', name, runs[0].scriptHash.slice(0, 16), runtime === 'py' ? 'attacks.py' : 'attacks.mjs');
      const received = signals.received;
      for (const attack of attacks) {
        const run = runs.find((r) => r.taskId === attack);
        // A signal does not say who sent it: any SIGCONT during this script's runs is its signal attack's.
        results.push(judge(`${runtime}:${attack}`, attack, run, { secrets, dataDir, outside, runtime, snapshot, signalled: received > 0 }));
      }
      signals.received = 0;
    }
    return { isolation: sandbox.isolation.kind, attacks: results };
  } finally {
    process.off('SIGCONT', onSignal);
    await runner.close();
    sibling.kill('SIGKILL');
    if (!options.server) await server.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  }
}

interface JudgeContext {
  secrets: { node: string; control: string; sibling: string };
  dataDir: string;
  outside: string;
  runtime: 'py' | 'js';
  snapshot: string;
  signalled: boolean;
}

/** Attacks on the resource limits: only the agent can say what it got (its report), and a limit ends them. */
const LIMIT_ATTACKS = new Set(['memory', 'fork-bomb', 'cpu-spin', 'big-file']);

function judge(name: string, attack: string, run: ClientRunRecord | undefined, ctx: JudgeContext): AttackResult {
  if (!run) return { name, escaped: false, ran: false, evidence: 'the attack did not run' };
  const said = agentReport(run);
  // A resource attack the time limit stopped ran too: on a loaded machine a niced spinner meets the wall-clock
  // limit before its CPU limit, and either way it got nothing past them.
  const ran = said !== undefined || run.code === 'script_crashed' || (LIMIT_ATTACKS.has(attack) && run.code === 'time_limit');
  const evidence = said?.evidence ?? `${run.code ?? run.status}: ${run.reason ?? ''}`;
  const leaked = [ctx.secrets.node, ctx.secrets.control, ctx.secrets.sibling].some((s) => run.stdout.includes(s) || run.stderr.includes(s));
  const result = (escaped: boolean, why = evidence): AttackResult => ({ name, escaped, ran, evidence: why });
  switch (attack) {
    case 'write-outside': {
      const marker = `${ctx.runtime}-pwned`;
      return result(existsSync(join(ctx.outside, marker)) || existsSync(join(ctx.dataDir, marker)));
    }
    case 'rewrite-snapshot':
      return result(hashContent(readFileSync(ctx.snapshot)) !== run.scriptHash);
    case 'signal-peer':
      return result(ctx.signalled);
    case 'setsid-grandchild':
      // Held past the time limit = the grandchild kept the run (and its slot).
      return result((run.processMs ?? 0) >= HOSTILE_TIME_LIMIT_S * 1000, `${evidence}; the run took ${Math.round(run.processMs ?? 0)} ms`);
    case 'memory':
    case 'fork-bomb':
    case 'cpu-spin':
    case 'big-file':
      // Only the agent can count what it got; a run a limit killed before it could say got nothing past it.
      return result(said?.managed === true);
    default:
      // Reads: the secret in what the agent printed (as it would send it anywhere).
      return result(leaked);
  }
}

function agentReport(run: ClientRunRecord): AgentReport | undefined {
  for (const line of run.stdout.split('\n')) {
    try {
      const value = JSON.parse(line) as Partial<AgentReport>;
      if (typeof value.attack === 'string' && typeof value.managed === 'boolean') return value as AgentReport;
    } catch {
      // Not the report line.
    }
  }
  return undefined;
}

function spawned(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
}

/** The chaos bench's figure: attacks tried, attacks that got through, and the isolation they met. */
export async function runHostileAgents(): Promise<{ sandbox_attacks: number; sandbox_escapes: number; isolation: string }> {
  const report = await runHostileReport();
  return { sandbox_attacks: report.attacks.length, sandbox_escapes: report.attacks.filter((a) => a.escaped).length, isolation: report.isolation };
}
