import { describe, expect, it } from 'vitest';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { mdnsServiceTag } from './constants.ts';

describe('mDNS service tags', () => {
  it('differ between swarms of one name and say nothing of the key', () => {
    const [a, b] = [generateSwarmKey(), generateSwarmKey()];
    expect(mdnsServiceTag('lab', a)).not.toBe(mdnsServiceTag('lab', b));
    expect(mdnsServiceTag('lab', a)).toBe(mdnsServiceTag('lab', a));
    expect(mdnsServiceTag('lab', a)).not.toContain(a.slice(0, 8));
    expect(mdnsServiceTag('lab', a)).toMatch(/^_agentjet-[0-9a-f]{16}\._udp\.local$/);
  });
});
