import { describe, expect, it } from 'vitest';
import { contentSecurityPolicy, isExternalWebLink, isPermissionGranted, isTrustedUrl } from './security.ts';

const ORIGIN = 'http://127.0.0.1:7420';

describe('isTrustedUrl', () => {
  it('trusts only the exact origin of the peer', () => {
    expect(isTrustedUrl('http://127.0.0.1:7420/#/models', ORIGIN)).toBe(true);
    expect(isTrustedUrl('http://127.0.0.1:7421/', ORIGIN)).toBe(false);
    expect(isTrustedUrl('https://127.0.0.1:7420/', ORIGIN)).toBe(false);
    expect(isTrustedUrl('http://localhost:7420/', ORIGIN)).toBe(false);
    expect(isTrustedUrl('file:///etc/passwd', ORIGIN)).toBe(false);
    expect(isTrustedUrl('not a url', ORIGIN)).toBe(false);
  });
});

describe('isExternalWebLink', () => {
  it('hands only web pages to the system browser', () => {
    expect(isExternalWebLink('https://example.org/docs')).toBe(true);
    expect(isExternalWebLink('file:///tmp/x')).toBe(false);
    expect(isExternalWebLink('javascript:alert(1)')).toBe(false);
    expect(isExternalWebLink('smb://share')).toBe(false);
  });
});

describe('isPermissionGranted', () => {
  it('grants clipboard writes to the peer only, and nothing else', () => {
    expect(isPermissionGranted('clipboard-sanitized-write', `${ORIGIN}/`, ORIGIN)).toBe(true);
    expect(isPermissionGranted('clipboard-sanitized-write', 'https://evil.example/', ORIGIN)).toBe(false);
    expect(isPermissionGranted('media', `${ORIGIN}/`, ORIGIN)).toBe(false);
    expect(isPermissionGranted('notifications', `${ORIGIN}/`, ORIGIN)).toBe(false);
  });
});

describe('contentSecurityPolicy', () => {
  it("allows the peer's WebSocket and no inline scripts", () => {
    const csp = contentSecurityPolicy(ORIGIN);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain('ws://127.0.0.1:7420');
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
  });
});
