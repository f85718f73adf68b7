/** Which view is shown. The view is mirrored in the URL fragment (`#/models`) so a reload keeps it. */
import type { StateCreator } from 'zustand';
import type { AppStore } from '../types.ts';
import { VIEW_IDS, isViewId, type ViewId } from '../../../../electron/common/views.ts';

export interface NavigationState {
  view: ViewId;
}

export interface NavigationActions {
  showView(view: ViewId): void;
  /** Move to the next (+1) or previous (-1) view in sidebar order, wrapping around. */
  stepView(direction: 1 | -1): void;
}

export type NavigationSlice = { navigation: NavigationState } & NavigationActions;

export const initialNavigationState: NavigationState = { view: 'swarm' };

export const createNavigationSlice: StateCreator<AppStore, [], [], NavigationSlice> = (set) => ({
  navigation: initialNavigationState,
  showView: (view) => set({ navigation: { view } }),
  stepView: (direction) =>
    set((s) => {
      const index = VIEW_IDS.indexOf(s.navigation.view);
      const next = VIEW_IDS[(index + direction + VIEW_IDS.length) % VIEW_IDS.length];
      return { navigation: { view: next } };
    }),
});

/** The view named by a fragment like `#/episodes` (anything else: null). */
export function viewFromHash(hash: string): ViewId | null {
  const name = hash.replace(/^#\/?/, '').split('&')[0];
  return isViewId(name) ? name : null;
}
