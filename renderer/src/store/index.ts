/**
 * The app's store: slices combined into one zustand store. `createAppStore` makes a fresh one (tests make one
 * per case); the app uses the single `appStore` through `useAppStore(selector)`.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import { useStore } from 'zustand';
import { createActivitySlice } from './activity/slice.ts';
import { createChartsSlice } from './charts/slice.ts';
import { createClientsSlice } from './clients/slice.ts';
import { createConnectionSlice } from './connection/slice.ts';
import { createEpisodesSlice } from './episodes/slice.ts';
import { createModelsSlice } from './models/slice.ts';
import { createNavigationSlice } from './navigation/slice.ts';
import { createResearchSlice } from './research/slice.ts';
import { createRunsSlice } from './runs/slice.ts';
import { createSwarmSlice } from './swarm/slice.ts';
import { createTimelineSlice } from './timeline/slice.ts';
import type { AppStore } from './types.ts';

export type { AppStore } from './types.ts';

export function createAppStore(): StoreApi<AppStore> {
  return createStore<AppStore>()((...args) => ({
    ...createConnectionSlice(...args),
    ...createSwarmSlice(...args),
    ...createNavigationSlice(...args),
    ...createActivitySlice(...args),
    ...createModelsSlice(...args),
    ...createRunsSlice(...args),
    ...createResearchSlice(...args),
    ...createClientsSlice(...args),
    ...createEpisodesSlice(...args),
    ...createTimelineSlice(...args),
    ...createChartsSlice(...args),
  }));
}

export const appStore = createAppStore();

export function useAppStore<T>(selector: (state: AppStore) => T): T {
  return useStore(appStore, selector);
}
