/**
 * What the window may load and ask for. Pure functions (no Electron import) so they are unit-tested.
 * The window shows only the peer's own UI origin; everything else is refused or handed to the system browser.
 */

/** True when `url` is on exactly `trustedOrigin` (scheme, host and port). Malformed URLs are never trusted. */
export function isTrustedUrl(url: string, trustedOrigin: string): boolean {
  try {
    return new URL(url).origin === trustedOrigin;
  } catch {
    return false;
  }
}

/** Links that may be opened in the system browser: web pages only (no file:, no custom schemes). */
export function isExternalWebLink(url: string): boolean {
  try {
    const { protocol } = new URL(url);
    return protocol === 'https:' || protocol === 'http:';
  } catch {
    return false;
  }
}

/** Permissions the UI needs, granted only to the trusted origin: writing to the clipboard (copy buttons). */
const GRANTED_PERMISSIONS = new Set(['clipboard-sanitized-write']);

export function isPermissionGranted(permission: string, requestingUrl: string, trustedOrigin: string): boolean {
  return GRANTED_PERMISSIONS.has(permission) && isTrustedUrl(requestingUrl, trustedOrigin);
}

/** The Content-Security-Policy sent with the UI: own scripts only, API calls and the event socket to the peer. */
export function contentSecurityPolicy(trustedOrigin: string): string {
  const socketOrigin = trustedOrigin.replace(/^http/, 'ws');
  return [
    "default-src 'self'",
    "script-src 'self'",
    `connect-src 'self' ${socketOrigin}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
