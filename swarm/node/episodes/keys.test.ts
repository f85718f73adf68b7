import { describe, expect, it } from 'vitest';
import { mintClientKey, mintEpisodeKey, verifyClientKey, verifyEpisodeKey } from './keys.ts';

const secret = '11'.repeat(32);
const otherSecret = '22'.repeat(32);

describe('episode and client keys', () => {
  it('verify to the id they were minted for', () => {
    expect(verifyEpisodeKey(secret, mintEpisodeKey(secret, 'ep_abc'))).toBe('ep_abc');
    expect(verifyClientKey(secret, mintClientKey(secret, 'runner-1'))).toMatchObject({ client: 'runner-1', generation: 0 });
    expect(verifyClientKey(secret, mintClientKey(secret, 'a.b:c-d', { generation: 7 }))).toMatchObject({ client: 'a.b:c-d', generation: 7 });
  });

  it('cannot be forged, altered, moved to another id or used as the other kind', () => {
    const key = mintEpisodeKey(secret, 'ep_abc');
    expect(verifyEpisodeKey(otherSecret, key)).toBeNull();
    expect(verifyEpisodeKey(secret, key.replace('ep_abc', 'ep_abd'))).toBeNull();
    expect(verifyEpisodeKey(secret, key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'))).toBeNull();
    expect(verifyClientKey(secret, key)).toBeNull();
    expect(verifyEpisodeKey(secret, mintClientKey(secret, 'ep_abc'))).toBeNull();
    for (const junk of ['', 'aj-ep-', 'aj-ep-.', 'Bearer x', 'aj-ep-ep_abc']) expect(verifyEpisodeKey(secret, junk)).toBeNull();
  });

  it('refuses ids that would not survive in a key', () => {
    expect(() => mintEpisodeKey(secret, 'has space')).toThrow(TypeError);
    expect(() => mintClientKey(secret, 'x'.repeat(129))).toThrow(TypeError);
  });

  it('client keys expire, and their expiry and generation cannot be altered', () => {
    const now = Date.UTC(2026, 0, 1);
    const key = mintClientKey(secret, 'runner-1', { ttlS: 60, now });
    expect(verifyClientKey(secret, key, now + 59_000)).toMatchObject({ client: 'runner-1' });
    expect(verifyClientKey(secret, key, now + 60_000)).toBeNull();
    const [prefix, rest] = [key.slice(0, 6), key.slice(6)];
    const [expires, generation] = rest.split('.');
    const later = (parseInt(expires, 36) + 3600).toString(36);
    expect(verifyClientKey(secret, prefix + rest.replace(expires, later), now + 61_000)).toBeNull();
    expect(verifyClientKey(secret, prefix + rest.replace(`.${generation}.`, '.z.'), now)).toBeNull();
    expect(() => mintClientKey(secret, 'runner-1', { ttlS: 0 })).toThrow(TypeError);
  });
});
