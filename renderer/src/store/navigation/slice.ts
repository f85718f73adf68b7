/**
 * Which view is shown, and where inside it (`path`: a run page is `runs` + `<id>`, a comparison `runs` +
 * `compare/<id>,<id>`). Both are mirrored in the URL fragment (`#/models`, `#/runs/<id>`) so a reload keeps them.
 */
import type { StateCreator } from 'zustand';
import type { AppStore } from '../types.ts';
import { VIEW_IDS, isViewId, type ViewId } from '../../../../electron/common/views.ts';

export interface NavigationState {
  view: ViewId;
  /** The place inside the view, after `#/<view>/`; '' for the view's own page. */
  path: string;
}

export interface NavigationActions {
  /** Show a view, at `path` inside it (default: the view's own page). */
  showView(view: ViewId, path?: string): void;
  /** Move to the next (+1) or previous (-1) view in sidebar order, wrapping around. */
  stepView(direction: 1 | -1): void;
}

export type NavigationSlice = { navigation: NavigationState } & NavigationActions;

export const initialNavigationState: NavigationState = { view: 'swarm', path: '' };

export const createNavigationSlice: StateCreator<AppStore, [], [], NavigationSlice> = (set) => ({
  navigation: initialNavigationState,
  showView: (view, path = '') =>
    set((s) => (s.navigation.view === view && s.navigation.path === path ? s : { navigation: { view, path } })),
  stepView: (direction) =>
    set((s) => {
      const index = VIEW_IDS.indexOf(s.navigation.view);
      const next = VIEW_IDS[(index + direction + VIEW_IDS.length) % VIEW_IDS.length];
      return { navigation: { view: next, path: '' } };
    }),
});

/** The view and path named by a fragment like `#/episodes` or `#/runs/abc` (anything else: null). */
export function routeFromHash(hash: string): NavigationState | null {
  const route = hash.replace(/^#\/?/, '').split('&')[0];
  const slash = route.indexOf('/');
  const view = slash === -1 ? route : route.slice(0, slash);
  if (!isViewId(view)) return null;
  return { view, path: slash === -1 ? '' : route.slice(slash + 1).replace(/\/+$/, '') };
}

/** The view named by a fragment like `#/episodes` (anything else: null). */
export function viewFromHash(hash: string): ViewId | null {
  return routeFromHash(hash)?.view ?? null;
}

/** The fragment that names a place: `#/runs` or `#/runs/<path>`. */
export function hashOf({ view, path }: NavigationState): string {
  return path ? `#/${view}/${path}` : `#/${view}`;
}
