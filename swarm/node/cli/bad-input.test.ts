/**
 * The CLI's bad-input paths that need no running peer, run in-process: usage errors exit 2 with the reason and the
 * usage, other failures exit 1 with `error: NAME` on a line of its own.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { didYouMean, joinNegativeValues } from './command-line.ts';
import { closestName } from '../../common/closest-name.ts';
import { defaultClientName } from './attach-command.ts';
import { errorName, runMain } from './testing/run-main.ts';

const emptyDir = () => mkdtempSync(join(tmpdir(), 'agentjet-bad-input-'));

describe('flags', () => {
  it('suggests the nearest known flag for an unknown one', async () => {
    const result = await runMain(['attach', 'a.ts', '--tasks', 't', '--model', 'tiny', '--repat', '2']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('did you mean --repeat?');
    expect(didYouMean({ repeat: { type: 'string' } }, ['--zzzzzz'])).toBe('');
  });

  it('takes a negative number as a value, and the command refuses it as a usage error', async () => {
    expect(joinNegativeValues({ concurrency: { type: 'string' }, json: { type: 'boolean' } }, ['--concurrency', '-1', '--json', '-2'])).toEqual(['--concurrency=-1', '--json', '-2']);
    const result = await runMain(['attach', 'a.ts', '--tasks', 't', '--model', 'tiny', '--concurrency', '-1']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--concurrency');
    expect(result.stderr).toContain('"-1"');
  });

  it('help of an unknown command says so, lists the commands and exits 2', async () => {
    const result = await runMain(['help', 'atach']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unknown command "atach"');
    expect(result.stderr).toContain('did you mean attach?');
    expect(result.stderr).toContain('episodes');
    expect((await runMain(['help', 'attach'])).code).toBe(0);
  });
});

describe('serve', () => {
  it('refuses an unknown built-in model before the peer starts, naming the known ones', async () => {
    const dataDir = emptyDir();
    const result = await runMain(['serve', '--model', 'builtin:huge', '--data-dir', dataDir, '--port', '0']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('builtin:tiny');
  });
});

describe('episodes', () => {
  it('refuses an unknown subcommand and a bad --limit with exit 2', async () => {
    const dataDir = emptyDir();
    expect((await runMain(['episodes', 'frobnicate', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['episodes', 'list', '--limit', 'x', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['episodes', 'show', '--data-dir', dataDir])).code).toBe(2);
  });
});

describe('clients and checkpoints', () => {
  it('refuse wrong usage with exit 2', async () => {
    const dataDir = emptyDir();
    expect((await runMain(['clients', 'frobnicate', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['clients', 'pause', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['checkpoints', 'frobnicate', 'tiny', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['checkpoints', 'export', 'tiny', 'x', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['checkpoints', 'list', 'tiny', '3', '--data-dir', dataDir])).code).toBe(2);
  });

  it('without a running peer, say so with exit 1 and the error name on its own line', async () => {
    const result = await runMain(['clients', 'pause', 'nobody', '--data-dir', emptyDir()]);
    expect(result.code).toBe(1);
    expect(errorName(result)).toBe('PeerNotRunningError');
    expect(result.stderr).not.toContain('Error: ');
    const json = await runMain(['clients', 'list', '--data-dir', emptyDir(), '--json']);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { name: 'PeerNotRunningError' } });
  });
});

describe('demo', () => {
  it('refuses bad flags with exit 2', async () => {
    expect((await runMain(['demo', '--tasks', 't.jsonl', '--no-ui'])).code).toBe(2);
    expect((await runMain(['demo', '--steps', 'x', '--no-ui'])).code).toBe(2);
    expect((await runMain(['demo', '--lr', '-1', '--no-ui'])).code).toBe(2);
    expect((await runMain(['demo', '--scenario', 'maze', '--no-ui'])).code).toBe(2);
    expect((await runMain(['demo', '--scenario', 'all', '--script', 'a.ts', '--no-ui'])).code).toBe(2);
    expect((await runMain(['demo', '--scenario', 'cocktail', '--script', 'a.ts', '--no-ui'])).code).toBe(2);
  });
});

describe('names', () => {
  it('names an agent.* script after its folder, any other after its file', () => {
    expect(defaultClientName('/x/examples/calculator/agent.ts')).toBe('calculator');
    expect(defaultClientName('/x/examples/python-stdlib/agent.py')).toBe('python-stdlib');
    expect(defaultClientName('/x/my agent.ts')).toBe('my-agent');
  });

  it('guesses a typo, not another name', () => {
    expect(closestName('tinyy', ['tiny', 'gpt-4o-mini'])).toBe('tiny');
    expect(closestName('big', ['tiny'])).toBeUndefined();
  });
});

describe('research', () => {
  it('refuses a missing or bad study file before any peer starts, naming the key', async () => {
    const dataDir = emptyDir();
    const missing = await runMain(['research', 'run', join(dataDir, 'none.study.yaml'), '--data-dir', dataDir]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
    const file = join(dataDir, 'bad.study.yaml');
    writeFileSync(file, 'name: s\nquestion: q\nhypothesis: h\ndecision: { kind: diff }\nbase: { script: a.ts, tasks: { file: t.jsonl } }\nstages: [{ name: m, steps: 1, seeds: 2, arms: [{ name: a }] }]\n');
    const bad = await runMain(['research', 'run', file, '--data-dir', dataDir]);
    expect(bad.code).toBe(1);
    expect(errorName(bad)).toBe('StudyFileError');
    expect(bad.stderr).toContain('decision.kind');
    expect(existsSync(join(dataDir, 'agentjet.sqlite'))).toBe(false);
  });

  it('refuses an unknown subcommand, a flag of another subcommand and a bad budget with exit 2', async () => {
    const dataDir = emptyDir();
    expect((await runMain(['research', 'frobnicate', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['research', 'list', '--planner', 'env', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['research', 'ask', 'q?', '--budget', 'soon', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['research', 'ask', 'q?', '--planner', 'ftp://x', '--data-dir', dataDir])).code).toBe(2);
    expect((await runMain(['research', 'show', '--data-dir', dataDir])).code).toBe(2);
  });
});
