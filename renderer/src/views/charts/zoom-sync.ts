/**
 * X-zoom shared by the panels of one sync group (RunChart's syncKey). uPlot's cursor sync moves the crosshair;
 * zoom goes through here instead, so the "Reset zoom" button and a double-click reset every panel, and each panel
 * resets to its own data's range. A member never hears its own broadcast.
 */

/** An x range in steps; null: not zoomed (the panel's full range). */
export type ZoomRange = readonly [number, number] | null;

export interface ZoomMember {
  applyZoom(range: ZoomRange): void;
}

export interface ZoomGroups {
  /** Adds `member` to `key`'s group; returns how to leave it. */
  join(key: string, member: ZoomMember): () => void;
  broadcast(key: string, from: ZoomMember, range: ZoomRange): void;
  size(key: string): number;
}

export function createZoomGroups(): ZoomGroups {
  const groups = new Map<string, Set<ZoomMember>>();
  return {
    join(key, member) {
      let group = groups.get(key);
      if (!group) groups.set(key, (group = new Set()));
      group.add(member);
      return () => {
        group.delete(member);
        if (group.size === 0) groups.delete(key);
      };
    },
    broadcast(key, from, range) {
      for (const member of [...(groups.get(key) ?? [])]) if (member !== from) member.applyZoom(range);
    },
    size: (key) => groups.get(key)?.size ?? 0,
  };
}

/** The app's groups: every RunChart on the page shares them. */
export const zoomGroups = createZoomGroups();
