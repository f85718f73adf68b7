import { describe, expect, it } from 'vitest';
import { attachRequest } from './attach-command.ts';
import { runCli } from '../cli/peer-process.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

describe('agentjet attach: the request it builds', () => {
  it('turns flags into an attach request (paths absolute, aliases repeatable, team roles)', () => {
    const single = attachRequest({ tasks: 'tasks.jsonl', model: 'tiny', alias: ['gpt-4o-mini', 'gpt-4o'], repeat: '4', concurrency: '8', weight: '2.5' }, 'my agent.ts');
    expect(single).toMatchObject({
      name: 'my-agent',
      script: { path: expect.stringMatching(/^\/.*my agent\.ts$/) },
      tasks: { path: expect.stringMatching(/^\/.*tasks\.jsonl$/) },
      model: 'tiny',
      aliases: ['gpt-4o-mini', 'gpt-4o'],
      repeat: 4,
      concurrency: 8,
      weight: 2.5,
      inFlight: 'finish',
      sandbox: true,
    });
    expect(attachRequest({ tasks: 't.jsonl', team: 'proposer=a,verifier=b' }, 'x.py')).toMatchObject({ models: { proposer: 'a', verifier: 'b' } });
  });

  it('refuses wrong usage with UsageError', () => {
    expect(() => attachRequest({ model: 'tiny' }, 'a.ts')).toThrow(expect.objectContaining({ name: 'UsageError' }));
    expect(() => attachRequest({ tasks: 't', model: 'a', team: 'p=a,v=b' }, 'a.ts')).toThrow(expect.objectContaining({ name: 'UsageError' }));
    expect(() => attachRequest({ tasks: 't', team: 'solo=a' }, 'a.ts')).toThrow(expect.objectContaining({ name: 'UsageError' }));
    expect(() => attachRequest({ tasks: 't', model: 'a', repeat: '0' }, 'a.ts')).toThrow(expect.objectContaining({ name: 'UsageError' }));
    for (const bad of [{ retries: '11' }, { retries: '-1' }, { 'max-failures': '0' }, { 'idle-timeout': '0' }, { 'output-idle': '-5' }, { network: 'off' }]) {
      expect(() => attachRequest({ tasks: 't', model: 'a', ...bad }, 'a.ts')).toThrow(expect.objectContaining({ name: 'UsageError' }));
    }
  });

  it('passes the breaker threshold, idle timeout, output idle limit and network the API accepts', () => {
    const request = attachRequest({ tasks: 't', model: 'a', 'max-failures': '3', 'idle-timeout': '120', 'output-idle': '0', network: 'none', retries: '0' }, 'a.ts');
    expect(request).toMatchObject({ maxConsecutiveFailures: 3, idleTimeoutS: 120, outputIdleS: 0, network: 'none', retries: 0 });
  });

  it('says plainly when no peer runs in the data folder', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentjet-attach-'));
    const result = await runCli(['clients', 'list', '--data-dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PeerNotRunningError');
  });
});
