import { describe, expect, it } from 'vitest';
import { createSwarmToken, parseSwarmToken, SWARM_TOKEN_PREFIX } from './token.ts';

const bootstrap = ['/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWGRUVh6dpPHgt5i4Y8Lb9pXhDsB1yJ4uT1Xm3Lq1AQBcd'];

describe('swarm token', () => {
  it('round-trips name, key and bootstrap addresses through one string', () => {
    const token = createSwarmToken({ name: 'lab-a', bootstrap });
    expect(token.startsWith(SWARM_TOKEN_PREFIX)).toBe(true);
    expect(token).toMatch(/^ajs1\.[A-Za-z0-9_-]+$/);
    const parsed = parseSwarmToken(`  ${token}\n`);
    expect(parsed.name).toBe('lab-a');
    expect(parsed.key).toMatch(/^[0-9a-f]{64}$/);
    expect(parsed.bootstrap).toEqual(bootstrap);
  });

  it('gives every new swarm its own key', () => {
    expect(parseSwarmToken(createSwarmToken({ name: 'x' })).key).not.toBe(parseSwarmToken(createSwarmToken({ name: 'x' })).key);
  });

  it.each([
    ['empty', ''],
    ['wrong prefix', 'ajs2.eyJ2IjoxfQ'],
    ['not base64url', 'ajs1.***'],
    ['not json', `ajs1.${Buffer.from('nope').toString('base64url')}`],
    ['unknown version', `ajs1.${Buffer.from(JSON.stringify({ v: 2, name: 'a', key: 'a'.repeat(64), bootstrap: [] })).toString('base64url')}`],
    ['short key', `ajs1.${Buffer.from(JSON.stringify({ v: 1, name: 'a', key: 'abc', bootstrap: [] })).toString('base64url')}`],
    ['bad address', `ajs1.${Buffer.from(JSON.stringify({ v: 1, name: 'a', key: 'a'.repeat(64), bootstrap: ['not-an-addr'] })).toString('base64url')}`],
  ])('rejects a token that is %s', (_case, token) => {
    expect(() => parseSwarmToken(token)).toThrow(expect.objectContaining({ name: 'InvalidSwarmTokenError' }));
  });

  it('rejects a swarm name with spaces when creating', () => {
    expect(() => createSwarmToken({ name: 'my lab' })).toThrow(expect.objectContaining({ name: 'InvalidSwarmTokenError' }));
  });
});
