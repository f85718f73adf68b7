/**
 * The control-API token travels in the URL fragment (`#token=…`: never sent to a server, never logged).
 * On first load we take it from there, keep it in sessionStorage (so a reload keeps working) and remove it
 * from the address bar (so it does not end up in screenshots or bookmarks).
 */
export const TOKEN_STORAGE_KEY = 'agentjet.token';

/** The token in a fragment like `#token=abc` or `#/models&token=abc`; null when there is none. */
export function parseTokenFromHash(hash: string): string | null {
  const part = fragmentParts(hash).find((p) => p.startsWith('token='));
  if (!part) return null;
  try {
    return decodeURIComponent(part.slice('token='.length)) || null;
  } catch {
    return null; // malformed percent-encoding: treat as no token rather than crash the UI
  }
}

function fragmentParts(hash: string): string[] {
  return hash.replace(/^#/, '').split('&').filter(Boolean);
}

/** The fragment with the token removed (other parts, such as the current view, are kept). */
export function hashWithoutToken(hash: string): string {
  const parts = fragmentParts(hash).filter((part) => !part.startsWith('token='));
  return parts.length ? `#${parts.join('&')}` : '';
}

interface TokenEnvironment {
  location: Pick<Location, 'hash' | 'pathname' | 'search'>;
  storage: Pick<Storage, 'getItem' | 'setItem'>;
  history: Pick<History, 'replaceState'>;
}

/** Take the token from the fragment (preferred: it is the newest) or from sessionStorage. */
export function resolveToken({ location, storage, history }: TokenEnvironment): string | null {
  const fromHash = parseTokenFromHash(location.hash);
  if (fromHash) {
    storage.setItem(TOKEN_STORAGE_KEY, fromHash);
    history.replaceState(null, '', `${location.pathname}${location.search}${hashWithoutToken(location.hash)}`);
    return fromHash;
  }
  return storage.getItem(TOKEN_STORAGE_KEY);
}
