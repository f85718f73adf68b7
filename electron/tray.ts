/**
 * The tray icon: the swarm's state at a glance (a coloured dot), a tooltip, and quick actions. Pure: the state
 * comes from the control API's status events, the actions are passed in; Electron builds the Tray from these.
 */
import type { MenuItemConstructorOptions } from 'electron';
import type { StatusPayload } from '../swarm/common/api.ts';

/**
 * - offline: the peer does not answer (starting, or its events socket dropped)
 * - solo: running, in no swarm
 * - alone: in a swarm, no other peer heard from
 * - swarm: in a swarm with other peers
 * - problem: a hosted model failed
 * Training shows in the label, not the colour: it is the normal busy state.
 */
export type TrayLevel = 'offline' | 'solo' | 'alone' | 'swarm' | 'problem';

export interface TrayState {
  level: TrayLevel;
  /** First line of the menu and the tooltip. */
  headline: string;
  /** e.g. "2 models · 1 training". */
  detail: string;
  swarm: string | null;
}

export function trayState(status: StatusPayload | null): TrayState {
  if (!status) return { level: 'offline', headline: 'AgentJet — connecting to the peer…', detail: '', swarm: null };
  const failed = status.models.filter((m) => m.engineState === 'failed').length;
  const training = status.models.filter((m) => m.engineState === 'rolling' || m.engineState === 'draining' || m.engineState === 'updating').length;
  const { p2p } = status;
  const level: TrayLevel = failed > 0 ? 'problem' : !p2p.enabled ? 'solo' : p2p.peers === 0 ? 'alone' : 'swarm';
  const where = !p2p.enabled
    ? 'not in a swarm'
    : `swarm ${p2p.swarm ?? '?'} · ${p2p.peers === 0 ? 'no other peers yet' : `${p2p.peers} ${p2p.peers === 1 ? 'peer' : 'peers'}`}`;
  const parts = [`${status.models.length} ${status.models.length === 1 ? 'model' : 'models'}`];
  if (training > 0) parts.push(`${training} training`);
  if (failed > 0) parts.push(`${failed} failed`);
  return { level, headline: `AgentJet — ${where}`, detail: parts.join(' · '), swarm: p2p.enabled ? p2p.swarm : null };
}

export interface TrayActions {
  showWindow(): void;
  showSwarm(): void;
  copyJoinToken(): void;
  attachScript(): void;
  openDataFolder(): void;
  quit(): void;
}

export function trayMenuTemplate(state: TrayState, actions: TrayActions): MenuItemConstructorOptions[] {
  return [
    { label: state.headline, enabled: false },
    ...(state.detail ? [{ label: state.detail, enabled: false }] : []),
    { type: 'separator' },
    { label: 'Open AgentJet', click: () => actions.showWindow() },
    state.swarm
      ? { label: `Copy Join Token of ${state.swarm}`, click: () => actions.copyJoinToken() }
      : { label: 'Create or Join a Swarm…', click: () => actions.showSwarm(), enabled: state.level !== 'offline' },
    { label: 'Attach Script…', click: () => actions.attachScript(), enabled: state.level !== 'offline' },
    { label: 'Open Data Folder', click: () => actions.openDataFolder() },
    { type: 'separator' },
    { label: 'Quit AgentJet', click: () => actions.quit() },
  ];
}

/** The dot's colour per level, as [r, g, b] (the UI's status colours). */
export const TRAY_COLOURS: Record<TrayLevel, readonly [number, number, number]> = {
  offline: [138, 143, 152],
  solo: [79, 70, 229],
  alone: [217, 119, 6],
  swarm: [22, 163, 74],
  problem: [220, 38, 38],
};

/**
 * The icon as a raw BGRA bitmap (what nativeImage.createFromBitmap takes): a filled, anti-aliased dot of the
 * level's colour on transparency. Drawn here, so the app ships no image per state.
 */
export function trayIconBitmap(level: TrayLevel, size: number): Buffer {
  const [r, g, b] = TRAY_COLOURS[level];
  const pixels = Buffer.alloc(size * size * 4);
  const centre = (size - 1) / 2;
  const radius = size * 0.4;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const distance = Math.hypot(x - centre, y - centre);
      // One pixel of edge blending: coverage falls from 1 to 0 across the circle's border.
      const coverage = Math.max(0, Math.min(1, radius - distance + 0.5));
      const at = (y * size + x) * 4;
      pixels[at] = b;
      pixels[at + 1] = g;
      pixels[at + 2] = r;
      pixels[at + 3] = Math.round(coverage * 255);
    }
  }
  return pixels;
}
