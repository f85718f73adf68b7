import { describe, expect, it } from 'vitest';
import { TOKEN_STORAGE_KEY, hashWithoutToken, parseTokenFromHash, resolveToken } from './token.ts';

function environment(hash: string, stored: string | null = null) {
  const storage = new Map<string, string>(stored ? [[TOKEN_STORAGE_KEY, stored]] : []);
  const urls: string[] = [];
  return {
    env: {
      location: { hash, pathname: '/', search: '' },
      storage: { getItem: (key: string) => storage.get(key) ?? null, setItem: (key: string, value: string) => void storage.set(key, value) },
      history: { replaceState: (_data: unknown, _unused: string, url?: string | URL | null) => void urls.push(String(url)) },
    },
    storage,
    urls,
  };
}

describe('parseTokenFromHash', () => {
  it('reads the token alone or next to a view', () => {
    expect(parseTokenFromHash('#token=abc')).toBe('abc');
    expect(parseTokenFromHash('#/models&token=a%2Fb')).toBe('a/b');
  });

  it('gives null for no token, an empty token, or broken encoding', () => {
    expect(parseTokenFromHash('')).toBeNull();
    expect(parseTokenFromHash('#/swarm')).toBeNull();
    expect(parseTokenFromHash('#token=')).toBeNull();
    expect(parseTokenFromHash('#token=%E0%A4%A')).toBeNull();
  });
});

describe('hashWithoutToken', () => {
  it('keeps the other parts of the fragment', () => {
    expect(hashWithoutToken('#token=abc')).toBe('');
    expect(hashWithoutToken('#/episodes&token=abc')).toBe('#/episodes');
  });
});

describe('resolveToken', () => {
  it('takes the token from the fragment, stores it for the tab and clears it from the address bar', () => {
    const { env, storage, urls } = environment('#token=fresh', 'old');
    expect(resolveToken(env)).toBe('fresh');
    expect(storage.get(TOKEN_STORAGE_KEY)).toBe('fresh');
    expect(urls).toEqual(['/']);
  });

  it('falls back to the stored token after a reload, without touching the URL', () => {
    const { env, urls } = environment('#/models', 'kept');
    expect(resolveToken(env)).toBe('kept');
    expect(urls).toEqual([]);
  });

  it('gives null when there is no token anywhere', () => {
    expect(resolveToken(environment('').env)).toBeNull();
  });
});
