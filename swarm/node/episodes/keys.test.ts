import { describe, expect, it } from 'vitest';
import { mintClientKey, mintEpisodeKey, verifyClientKey, verifyEpisodeKey } from './keys.ts';

const secret = '11'.repeat(32);
const otherSecret = '22'.repeat(32);

describe('episode and client keys', () => {
  it('verify to the id they were minted for', () => {
    expect(verifyEpisodeKey(secret, mintEpisodeKey(secret, 'ep_abc'))).toBe('ep_abc');
    expect(verifyClientKey(secret, mintClientKey(secret, 'runner-1'))).toBe('runner-1');
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
  });
});
