import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SWARM_TOKEN_ENV, swarmTokenOf } from './node-command.ts';

const dir = mkdtempSync(join(tmpdir(), 'agentjet-token-input-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the swarm token, kept off the command line', () => {
  it('comes from a file or the environment as well as the flag', () => {
    const file = join(dir, 'swarm-token');
    writeFileSync(file, 'ajs1.from-file\n');
    expect(swarmTokenOf({ 'swarm-token-file': file }, {})).toBe('ajs1.from-file');
    expect(swarmTokenOf({}, { [SWARM_TOKEN_ENV]: ' ajs1.from-env ' })).toBe('ajs1.from-env');
    expect(swarmTokenOf({ 'swarm-token': 'ajs1.flag' }, {})).toBe('ajs1.flag');
    expect(swarmTokenOf({}, {})).toBeUndefined();
  });

  it('refuses two sources, a missing file and an empty one', () => {
    const empty = join(dir, 'empty');
    writeFileSync(empty, '  \n');
    expect(() => swarmTokenOf({ 'swarm-token': 'a' }, { [SWARM_TOKEN_ENV]: 'b' })).toThrow(expect.objectContaining({ name: 'UsageError' }));
    expect(() => swarmTokenOf({ 'swarm-token-file': join(dir, 'nope') }, {})).toThrow(expect.objectContaining({ name: 'UsageError' }));
    expect(() => swarmTokenOf({ 'swarm-token-file': empty }, {})).toThrow(expect.objectContaining({ name: 'UsageError' }));
  });
});
