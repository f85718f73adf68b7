/**
 * The sandbox against hostile agents (testing/hostile/): every attack of the hardening issue, under bubblewrap,
 * gets nothing — and the same attacks against the in-process guards alone get through, so the attacks are real
 * and the first test could fail. Tests that need bubblewrap skip, with the reason, where it cannot run here.
 */
import { mkdtempSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_NICE, detectSandbox, guardsOnly, hostSandbox, signalFromExitCode } from './sandbox.ts';
import type { ProcessResult } from './process.ts';
import { useRunnerFixture } from './testing/fixture.ts';
import { NODE_ATTACKS, PYTHON_ATTACKS, runHostileReport } from './testing/hostile/index.ts';
import { startEpisodeServer } from './testing/episode-server.ts';

const host = hostSandbox();
const bubblewrap = host.isolation.kind === 'bubblewrap';
if (!bubblewrap) console.warn(`sandbox tests that need bubblewrap are skipped: ${host.isolation.detail}`);
const server = startEpisodeServer();
afterAll(async () => (await server).close());
const { setup, attachInline } = useRunnerFixture();

/** The hostile runs hold slots for a few seconds each; the whole set runs twice in this file. */
const HOSTILE_TEST_TIMEOUT_MS = 120_000;

describe('hostile agents', () => {
  it.skipIf(!bubblewrap)('under bubblewrap, every attack fails', { timeout: HOSTILE_TEST_TIMEOUT_MS }, async () => {
    const report = await runHostileReport({ sandbox: host, server: await server });
    expect(report.isolation).toBe('bubblewrap');
    expect(report.attacks.map((a) => a.name)).toEqual([...PYTHON_ATTACKS.map((a) => `py:${a}`), ...NODE_ATTACKS.map((a) => `js:${a}`)]);
    expect(report.attacks.filter((a) => !a.ran)).toEqual([]);
    expect(report.attacks.filter((a) => a.escaped)).toEqual([]);
  });

  // The second half: without the sandbox the same agents get through the guards (Linux, where the attacks apply).
  it.skipIf(process.platform !== 'linux')('against the in-process guards alone, the same attacks get through', { timeout: HOSTILE_TEST_TIMEOUT_MS }, async () => {
    const report = await runHostileReport({ sandbox: guardsOnly('forced for the test'), server: await server });
    expect(report.isolation).toBe('none');
    const escaped = report.attacks.filter((a) => a.escaped).map((a) => a.name);
    expect(escaped).toEqual(expect.arrayContaining(['py:subprocess-cat', 'py:dir-fd', 'py:ctypes-open', 'py:hard-link', 'py:gc-deny-list', 'py:proc-sibling', 'py:signal-peer', 'py:write-outside', 'py:rewrite-snapshot', 'js:signal-peer']));
  });
});

describe('the time limit', () => {
  const DETACHED_GRANDCHILD = `
import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep(60)
    os._exit(0)
print("started", flush=True)
time.sleep(60)
`;

  it.skipIf(!bubblewrap)('kills the whole sandbox, a setsid grandchild included', async () => {
    const { runner } = await setup({ sandbox: host });
    await attachInline(runner, 'detached', 'detached.py', DETACHED_GRANDCHILD, { timeLimitS: 2 });
    await runner.settled('detached');
    const [run] = runner.runs('detached');
    expect(run.code).toBe('time_limit');
    expect(processesOf(run.episodeIds[0])).toEqual([]);
  });
});

/** Live processes (not zombies) whose environment names the episode: what is left of its run. */
function processesOf(episodeId: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'))) continue;
      if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`AGENTJET_EPISODE_ID=${episodeId}`)) found.push(pid);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

describe('CPU priority', () => {
  // Reports its own nice and its session's (the autogroup's; -1 where it may not read it) as metrics.
  const REPORT_PRIORITY = `
import { getPriority } from 'node:os';
import { readFileSync } from 'node:fs';
let autogroup = -1;
try {
  autogroup = Number(/nice (-?\\d+)/.exec(readFileSync('/proc/self/autogroup', 'utf8'))[1]);
} catch {}
console.log(JSON.stringify({ reward: 1, metrics: { nice: getPriority(), autogroup } }));
`;
  const autogroups = (() => {
    try {
      return readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
    } catch {
      return false;
    }
  })();

  async function priorityOf(sandbox: ReturnType<typeof hostSandbox>): Promise<Record<string, unknown> | undefined> {
    const { runner } = await setup({ sandbox });
    await attachInline(runner, 'priority', 'priority.mjs', REPORT_PRIORITY);
    await runner.settled('priority');
    const [run] = runner.runs('priority');
    expect(run.status).toBe('ended');
    return (JSON.parse(run.stdout ?? '{}') as { metrics?: Record<string, unknown> }).metrics;
  }

  // An agent starting beside a step must not take the trainer's core: the peer's engines go first.
  it.skipIf(!bubblewrap)('a sandboxed agent runs below the peer: its process and its session', async () => {
    expect(await priorityOf(host)).toEqual({ nice: AGENT_NICE, autogroup: autogroups ? AGENT_NICE : -1 });
  });

  it.skipIf(process.platform !== 'linux')('so does an agent without the sandbox', async () => {
    expect(await priorityOf(guardsOnly('forced for the test'))).toMatchObject({ nice: AGENT_NICE });
  });
});

describe('network', () => {
  const FETCH_GATEWAY = `
    let reached = true;
    try { await fetch(process.env.OPENAI_BASE_URL + '/models', { headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY } }); } catch { reached = false; }
    console.log(JSON.stringify({ reward: reached ? 1 : 0 }));`;

  it.skipIf(!bubblewrap)('network: none cuts everything, the gateway included; the default keeps it', async () => {
    const { runner } = await setup({ sandbox: host });
    await attachInline(runner, 'offline', 'offline.mjs', FETCH_GATEWAY, { network: 'none' });
    await attachInline(runner, 'online', 'online.mjs', FETCH_GATEWAY);
    await Promise.all([runner.settled('offline'), runner.settled('online')]);
    expect(runner.runs('offline').map((r) => r.reward)).toEqual([0]);
    expect(runner.runs('online').map((r) => r.reward)).toEqual([1]);
  });

  it('network: none is refused where the runner cannot cut the network', async () => {
    const { runner } = await setup({ sandbox: guardsOnly('forced for the test') });
    await expect(attachInline(runner, 'offline', 'offline.mjs', FETCH_GATEWAY, { network: 'none' })).rejects.toMatchObject({ name: 'ScriptAttachError' });
    expect(runner.list()).toEqual([]);
  });
});

describe('detection and reporting', () => {
  it('without bwrap on PATH the runner says scripts are not isolated', () => {
    const saved = process.env.PATH;
    // A PATH with only node on it: no bwrap.
    const dir = mkdtempSync(join(tmpdir(), 'agentjet-nobwrap-'));
    symlinkSync(process.execPath, join(dir, 'node'));
    process.env.PATH = dir;
    try {
      expect(detectSandbox().isolation.kind).toBe('none');
    } finally {
      process.env.PATH = saved;
    }
  });

  it('the runner reports the isolation it uses', async () => {
    const { runner } = await setup({ sandbox: guardsOnly('forced for the test') });
    expect(runner.isolation().kind).toBe('none');
    const { runner: boxed } = await setup();
    expect(boxed.isolation()).toEqual(host.isolation);
  });

  it('reads bubblewrap’s 128 + N exit as death by signal N', () => {
    const result = { exitCode: 137, signal: null } as ProcessResult;
    expect(signalFromExitCode(result)).toMatchObject({ exitCode: null, signal: 'SIGKILL' });
    expect(signalFromExitCode({ ...result, exitCode: 3 })).toMatchObject({ exitCode: 3, signal: null });
  });
});
