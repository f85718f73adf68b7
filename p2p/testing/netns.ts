/**
 * Test helper: network namespaces joined by veth pairs, so that peers on one machine have addresses of their own
 * and a link can be cut (partition) and restored (heal). Needs root and `ip netns`; `probeNetns` says whether
 * this machine allows it, and why not.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

export function probeNetns(): { ok: true } | { ok: false; reason: string } {
  const name = `aj-probe-${randomBytes(3).toString('hex')}`;
  const added = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if (added.error) return { ok: false, reason: `no ip command: ${added.error.message}` };
  if (added.status !== 0) return { ok: false, reason: `ip netns add is not permitted here: ${added.stderr.trim()}` };
  spawnSync('ip', ['netns', 'del', name]);
  return { ok: true };
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** Two namespaces, `a` (10.77.N.1) and `b` (10.77.N.2), joined by one veth pair. */
export class NetnsPair {
  readonly suffix = randomBytes(3).toString('hex');
  readonly a = { ns: `aj-${this.suffix}-a`, veth: `aj${this.suffix}a`, address: '' };
  readonly b = { ns: `aj-${this.suffix}-b`, veth: `aj${this.suffix}b`, address: '' };

  constructor(subnet = 77 + (randomBytes(1)[0] % 100)) {
    this.a.address = `10.${subnet}.0.1`;
    this.b.address = `10.${subnet}.0.2`;
  }

  create(): void {
    for (const side of [this.a, this.b]) ip('netns', 'add', side.ns);
    ip('link', 'add', this.a.veth, 'type', 'veth', 'peer', 'name', this.b.veth);
    for (const side of [this.a, this.b]) {
      ip('link', 'set', side.veth, 'netns', side.ns);
      ip('-n', side.ns, 'addr', 'add', `${side.address}/24`, 'dev', side.veth);
      ip('-n', side.ns, 'link', 'set', 'lo', 'up');
      ip('-n', side.ns, 'link', 'set', side.veth, 'up');
    }
  }

  /** Cut (`false`) or restore (`true`) the link, on both ends. */
  setLink(up: boolean): void {
    for (const side of [this.a, this.b]) ip('-n', side.ns, 'link', 'set', side.veth, up ? 'up' : 'down');
  }

  /** Remove both namespaces (their veth ends go with them); never throws. */
  destroy(): void {
    for (const side of [this.a, this.b]) spawnSync('ip', ['netns', 'del', side.ns]);
  }
}
