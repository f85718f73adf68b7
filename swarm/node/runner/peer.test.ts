/**
 * The runner inside a real peer: PeerRuntime with the real episode service, gateway and store, and builtin:tiny in
 * a worker thread. Scripts from examples/ are attached through the control API and the CLI, and talk to the
 * real gateway with their episode keys.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientRunRecord, ClientStatus } from '../../common/runner-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { runCli } from '../cli/peer-process.ts';
import { listEpisodes } from '../store/episode-list.ts';
import { getEpisode } from '../store/episode-reads.ts';

const EXAMPLES = fileURLToPath(new URL('../../../examples/', import.meta.url));
let peer: PeerRuntime;

beforeAll(async () => {
  peer = await PeerRuntime.start({
    dataDir: mkdtempSync(join(tmpdir(), 'agentjet-runner-peer-')),
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['gpt-4o-mini'], poolLimit: 64 }],
  });
});
afterAll(async () => {
  await peer?.stop();
});

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${peer.urls.api}${path}`, {
    method,
    headers: { authorization: `Bearer ${peer.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as T };
}

function storedEpisode(id: string) {
  return getEpisode(peer.db, id);
}

describe('runner in a real peer', () => {
  it('attaches the Python example through the control API; its episodes end in the store with their rewards', async () => {
    const attach = await api<ClientStatus>('POST', '/clients', {
      name: 'reverse',
      script: { path: join(EXAMPLES, 'python-stdlib/agent.py') },
      tasks: { path: join(EXAMPLES, 'python-stdlib/tasks.jsonl') },
      model: 'tiny',
      epochs: 1,
      concurrency: 4,
      sampling: { max_tokens: 8 },
    });
    expect(attach.status).toBe(201);
    const status = await peer.runner.settled('reverse');
    expect(status).toMatchObject({ state: 'finished', counts: { ended: 6, aborted: 0 } });
    const runs = (await api<{ runs: ClientRunRecord[] }>('GET', '/clients/reverse/runs')).body.runs;
    expect(runs).toHaveLength(6);
    for (const run of runs) {
      const stored = storedEpisode(run.episodeIds[0]);
      expect(['ended', 'trained']).toContain(stored?.state);
      expect(stored).toMatchObject({ client: 'reverse', scriptHash: status.scriptHash, reward: run.reward });
    }
    expect(runs.filter((r) => r.kind === 'eval').map((r) => r.taskId).sort()).toEqual(['w-agent', 'w-swarm']);
  });

  it('attaches the calculator (official openai client, tool calls, reward module, alias) through the CLI', async () => {
    const dir = join(EXAMPLES, 'calculator');
    // Two train tasks and one held-out task of the example keep the model's work small on a busy CPU.
    const lines = readFileSync(join(dir, 'tasks.jsonl'), 'utf8').trim().split('\n');
    const tasks = join(mkdtempSync(join(tmpdir(), 'agentjet-calc-')), 'tasks.jsonl');
    writeFileSync(tasks, [...lines.filter((l) => !l.includes('"split"')).slice(0, 2), lines.find((l) => l.includes('"split"'))].join('\n'));
    const cli = await runCli([
      'attach', join(dir, 'agent.ts'), '--tasks', tasks, '--reward', join(dir, 'reward.ts'),
      '--model', 'tiny', '--alias', 'gpt-4o-mini', '--epochs', '1', '--concurrency', '8', '--data-dir', peer.paths.dataDir,
    ]);
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    const status = await peer.runner.settled('calculator');
    expect(status.counts).toMatchObject({ ended: 3, aborted: 0 });
    expect(peer.runner.runs('calculator').map((r) => r.kind).sort()).toEqual(['eval', 'train', 'train']);
    const list = await runCli(['clients', 'list', '--json', '--data-dir', peer.paths.dataDir]);
    const clients = (JSON.parse(list.stdout) as { clients: ClientStatus[] }).clients;
    expect(clients.map((c) => c.name).sort()).toEqual(['calculator', 'reverse']);
    for (const run of peer.runner.runs('calculator')) expect([0, 1]).toContain(storedEpisode(run.episodeIds[0])?.reward);

    // An alias the host does not serve is the episode's own: a script hard-coding it gets answers from the gateway.
    const script = join(dirname(tasks), 'claude.mjs');
    writeFileSync(
      script,
      `const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
        body: JSON.stringify({ model: 'claude-9', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
      console.log(JSON.stringify({ reward: res.ok && (await res.json()).choices.length === 1 ? 1 : 0 }));`,
    );
    const aliased = await runCli(['attach', script, '--tasks', tasks, '--model', 'tiny', '--alias', 'claude-9', '--epochs', '1', '--data-dir', peer.paths.dataDir]);
    expect(aliased.stderr).toBe('');
    expect(aliased.code).toBe(0);
    expect((await peer.runner.settled('claude')).counts).toMatchObject({ ended: 3, aborted: 0 });
    for (const run of peer.runner.runs('claude')) expect(storedEpisode(run.episodeIds[0])?.reward).toBe(1);

    // Aliases of a model nobody hosts are refused at attach, with the error's name in the CLI's line.
    const refused = await runCli(['attach', script, '--tasks', tasks, '--model', 'claude-9', '--alias', 'gpt-4o-mini', '--name', 'unhosted', '--data-dir', peer.paths.dataDir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('ModelNotHostedError');
    expect(peer.runner.list().map((c) => c.name)).not.toContain('unhosted');
  }, 300_000);

  it('runs the guess-the-number environment and the proposer/verifier team against the real gateway', async () => {
    for (const [name, dir, file, models] of [
      ['guess', 'guess-the-number', 'agent.py', { model: 'tiny' }],
      ['team', 'proposer-verifier', 'agent.ts', { models: { proposer: 'tiny', verifier: 'gpt-4o-mini' } }],
    ] as const) {
      const res = await api<ClientStatus>('POST', '/clients', {
        name,
        script: { path: join(EXAMPLES, dir, file) },
        tasks: { path: join(EXAMPLES, dir, 'tasks.jsonl') },
        epochs: 1,
        concurrency: 8,
        ...models,
      });
      expect(res.status).toBe(201);
    }
    const [guess, team] = await Promise.all([peer.runner.settled('guess'), peer.runner.settled('team')]);
    expect(guess.counts).toMatchObject({ ended: 5, aborted: 0 });
    expect(team.counts).toMatchObject({ ended: 5, aborted: 0 });
    // Each team run is two episodes (one per role), each ended with its role's reward.
    for (const run of peer.runner.runs('team')) {
      expect(run.episodeIds).toHaveLength(2);
      for (const id of run.episodeIds) expect([0, 1]).toContain(storedEpisode(id)?.reward);
    }
  });

  it('keeps the node secret and the control token away from scripts', async () => {
    const snoop = `
      import { readFileSync } from 'node:fs';
      const task = JSON.parse(process.env.AGENTJET_TASK);
      const tryRead = (p) => { try { return readFileSync(p, 'utf8'); } catch (e) { return 'DENIED ' + e.code; } };
      console.log(JSON.stringify({ env: process.env, identity: tryRead(task.identity), control: tryRead(task.control) }));
      console.log(JSON.stringify({ reward: 0 }));`;
    const task = { id: 'snoop', identity: peer.paths.identity, control: peer.paths.control };
    await api('POST', '/clients', { name: 'snoop', script: { content: snoop, filename: 'snoop.mjs' }, tasks: { inline: [task] }, model: 'tiny', epochs: 1 });
    await peer.runner.settled('snoop');
    const [run] = peer.runner.runs('snoop');
    const seen = JSON.parse(run.stdout.split('\n')[0]) as { env: Record<string, string>; identity: string; control: string };
    expect(seen.identity).toMatch(/^DENIED/);
    expect(seen.control).toMatch(/^DENIED/);
    const text = JSON.stringify(seen.env);
    expect(text).not.toContain(peer.token);
    expect(text).not.toContain(peer.identity.secret);
  });

  it('serves a long-running TypeScript SDK client with a client key from the control API', async () => {
    const key = (await api<{ key: string; swarmUrl: string }>('POST', '/clients/sdk-ts/key')).body;
    const dir = mkdtempSync(join(tmpdir(), 'agentjet-sdk-'));
    const file = join(dir, 'client.mts');
    writeFileSync(
      file,
      `import OpenAI from ${JSON.stringify(fileURLToPath(import.meta.resolve('openai')))};
      import { SwarmClient } from ${JSON.stringify(fileURLToPath(new URL('../../../sdk/typescript/agentjet.ts', import.meta.url)))};
      const swarm = new SwarmClient();
      const summary = await swarm.run([{ id: 'a' }, { id: 'b' }], async (episode) => {
        const openai = new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
        const c = await openai.chat.completions.create({ model: episode.model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
        return { reward: (c.choices[0].message.content ?? '').length > 0 ? 1 : 0 };
      }, { model: 'tiny', concurrency: 4, repeat: 2 });
      console.log(JSON.stringify(summary));`,
    );
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      env: { PATH: process.env.PATH, AGENTJET_SWARM_URL: key.swarmUrl, AGENTJET_CLIENT_KEY: key.key },
    });
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ ended: 4, aborted: 0 });
    const rows = ['a', 'b'].flatMap((taskId) => listEpisodes(peer.db, { taskId }).episodes);
    expect(rows.map((r) => r.state).filter((s) => s === 'ended' || s === 'trained')).toHaveLength(4);
  });
});
