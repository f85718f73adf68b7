/**
 * `agentjet attach` against a real peer (builtin:tiny), in-process: what it refuses at once and why (a model
 * nobody hosts, a Python syntax error, a script from another folder under an attached name), `--dry-run`, and the
 * clients/episodes commands' answers for names and ids that do not exist.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PeerRuntime } from '../runtime.ts';
import { errorName, runMain } from './testing/run-main.ts';

const EXAMPLES = fileURLToPath(new URL('../../../examples/', import.meta.url));
const REWARD_1 = 'console.log(JSON.stringify({ reward: 1 }));\n';
let peer: PeerRuntime;
let work: string;
let tasks: string;

beforeAll(async () => {
  peer = await PeerRuntime.start({
    dataDir: mkdtempSync(join(tmpdir(), 'agentjet-attach-fast-')),
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['gpt-4o-mini'], poolLimit: 16 }],
  });
  work = mkdtempSync(join(tmpdir(), 'agentjet-attach-scripts-'));
  tasks = join(work, 'tasks.jsonl');
  writeFileSync(tasks, '{"id":"t1"}\n');
}, 120_000);
afterAll(async () => {
  await peer?.stop();
});

/** An agent script `agent.<ext>` in its own folder `name` under the work dir. */
function agentIn(folder: string, content: string, ext = 'mjs'): string {
  const dir = join(work, folder);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `agent.${ext}`);
  writeFileSync(file, content);
  return file;
}

const attach = (script: string, ...flags: string[]) => runMain(['attach', script, '--tasks', tasks, '--data-dir', peer.paths.dataDir, ...flags]);

describe('attach fails fast and says why', () => {
  it('refuses a model nobody hosts, naming the hosted ones and the likely one', async () => {
    const result = await attach(agentIn('typo', REWARD_1), '--model', 'tinyy');
    expect(result.code).toBe(1);
    expect(errorName(result)).toBe('ModelNotHostedError');
    expect(result.stderr).toContain('did you mean "tiny"?');
    expect(result.stderr).toMatch(/^agentjet attach: /);
    expect(peer.runner.list().map((c) => c.name)).not.toContain('typo');
  });

  it('refuses a Python script with a syntax error, at its file and line', async () => {
    const result = await attach(agentIn('broken', 'import json\ndef main(:\n    pass\n', 'py'), '--model', 'tiny');
    expect(result.code).toBe(1);
    expect(errorName(result)).toBe('ScriptSyntaxError');
    expect(result.stderr).toContain('agent.py:2');
  });

  it('names an agent.* script after its folder, and refuses another folder under that name without --swap', async () => {
    const first = agentIn('alpha', REWARD_1);
    expect((await attach(first, '--model', 'tiny', '--epochs', '1')).code).toBe(0);
    expect(peer.runner.list().map((c) => c.name)).toContain('alpha');

    const other = agentIn('beta', REWARD_1);
    const refused = await attach(other, '--model', 'tiny', '--epochs', '1', '--name', 'alpha');
    expect(refused.code).toBe(1);
    expect(errorName(refused)).toBe('ScriptSwapRefusedError');
    expect(peer.runner.get('alpha').version).toBe(1);

    // The same folder is a new version; another folder with --swap replaces it on purpose.
    expect((await attach(first, '--model', 'tiny', '--epochs', '1')).code).toBe(0);
    expect((await attach(other, '--model', 'tiny', '--epochs', '1', '--name', 'alpha', '--swap')).code).toBe(0);
    expect(peer.runner.get('alpha').version).toBe(3);
    await peer.runner.detach('alpha');
  });

  it('--dry-run runs one episode of the calculator and prints its calls and result; nothing stays attached', async () => {
    const dir = join(EXAMPLES, 'calculator');
    const result = await runMain([
      'attach', join(dir, 'agent.ts'), '--tasks', join(dir, 'tasks.jsonl'), '--reward', join(dir, 'reward.ts'),
      '--model', 'tiny', '--dry-run', '--data-dir', peer.paths.dataDir,
    ]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('dry run of calculator on task calc-0');
    expect(result.stdout).toContain('── call 1');
    expect(result.stdout).toMatch(/result: ended, reward -?\d/);
    expect(peer.runner.list().map((c) => c.name)).not.toContain('calculator');
  }, 120_000);

  it('a dry run that fails exits 1 with the abort code and the script\'s stderr', async () => {
    const result = await attach(agentIn('crash', 'console.error("boom here"); process.exit(3);\n'), '--model', 'tiny', '--dry-run');
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('code script_failed');
    expect(result.stdout).toContain('boom here');
  });
});

describe('names and ids that do not exist', () => {
  it('clients pause, resume and detach of an unknown client exit 1 and point at `agentjet clients list`', async () => {
    for (const sub of ['pause', 'resume', 'detach']) {
      const result = await runMain(['clients', sub, 'nobody', '--data-dir', peer.paths.dataDir]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('agentjet clients list');
      expect(result.stderr).not.toContain('/api/');
    }
  });

  it('checkpoints export of a missing step exits 1 and points at the command, not the route', async () => {
    const result = await runMain(['checkpoints', 'export', 'tiny', '7', '--out', join(work, 'x.tar'), '--data-dir', peer.paths.dataDir]);
    expect(result.code).toBe(1);
    expect(result.stderr).not.toContain('GET /api');
  });

  it('episodes show and export of a missing id exit 1 with the error name', async () => {
    for (const sub of ['show', 'export']) {
      const result = await runMain(['episodes', sub, 'ep-missing', '--data-dir', peer.paths.dataDir]);
      expect(result.code).toBe(1);
      expect(errorName(result)).toBeDefined();
    }
  });
});
