import { describe, expect, it } from 'vitest';
import type { ModelStatus, StatusPayload } from '../swarm/common/api.ts';
import { TRAY_COLOURS, trayIconBitmap, trayMenuTemplate, trayState, type TrayActions } from './tray.ts';

function model(engineState: ModelStatus['engineState']): ModelStatus {
  return { name: 'tiny', source: 'builtin:tiny', engineState, policyVersion: 1, step: 0, backend: null, pool: { active: 0, limit: 8 } };
}

function status(p2p: StatusPayload['p2p'], models: ModelStatus[] = []): StatusPayload {
  return {
    app: 'agentjet',
    version: '0.1.0',
    nodeId: 'n',
    startedAt: '2026-01-01T00:00:00Z',
    uptimeS: 1,
    roles: ['server'],
    dataDir: '/d',
    backend: null,
    urls: { api: 'a', gateway: 'g', ui: 'u' },
    models,
    store: { path: '/d/s', schemaVersion: 5, episodes: 0 },
    p2p,
  };
}

const OFF = { enabled: false, peerId: null, peers: 0, swarm: null };

describe('tray state', () => {
  it('tells offline, solo, alone in a swarm, with peers, and a failed model apart', () => {
    expect(trayState(null).level).toBe('offline');
    expect(trayState(status(OFF)).level).toBe('solo');
    expect(trayState(status({ enabled: true, peerId: 'p', peers: 0, swarm: 'lab' }))).toMatchObject({ level: 'alone', swarm: 'lab' });
    const busy = trayState(status({ enabled: true, peerId: 'p', peers: 2, swarm: 'lab' }, [model('rolling'), model('idle')]));
    expect(busy).toMatchObject({ level: 'swarm', headline: 'AgentJet — swarm lab · 2 peers', detail: '2 models · 1 training' });
    expect(trayState(status(OFF, [model('failed')]))).toMatchObject({ level: 'problem', detail: '1 model · 1 failed' });
  });

  it('offers the join token in a swarm, and the way into one otherwise', () => {
    const calls: string[] = [];
    const actions: TrayActions = {
      showWindow: () => calls.push('show'),
      showSwarm: () => calls.push('swarm'),
      copyJoinToken: () => calls.push('token'),
      attachScript: () => calls.push('attach'),
      openDataFolder: () => calls.push('data'),
      quit: () => calls.push('quit'),
    };
    const inSwarm = trayMenuTemplate(trayState(status({ enabled: true, peerId: 'p', peers: 1, swarm: 'lab' })), actions);
    const copy = inSwarm.find((item) => item.label === 'Copy Join Token of lab');
    (copy?.click as () => void)();
    expect(calls).toEqual(['token']);
    const solo = trayMenuTemplate(trayState(status(OFF)), actions);
    (solo.find((item) => item.label === 'Create or Join a Swarm…')?.click as () => void)();
    expect(calls).toEqual(['token', 'swarm']);
    const offline = trayMenuTemplate(trayState(null), actions);
    expect(offline.find((item) => item.label === 'Attach Script…')?.enabled).toBe(false);
    expect(offline[0]).toMatchObject({ label: 'AgentJet — connecting to the peer…', enabled: false });
  });

  it('draws a dot of the level’s colour: opaque at the centre, transparent in the corners', () => {
    const size = 16;
    const bitmap = trayIconBitmap('problem', size);
    expect(bitmap.length).toBe(size * size * 4);
    const pixel = (x: number, y: number) => [...bitmap.subarray((y * size + x) * 4, (y * size + x) * 4 + 4)];
    const [r, g, b] = TRAY_COLOURS.problem;
    expect(pixel(8, 8)).toEqual([b, g, r, 255]);
    expect(pixel(0, 0)[3]).toBe(0);
    expect(trayIconBitmap('swarm', size).equals(bitmap)).toBe(false);
  });
});
