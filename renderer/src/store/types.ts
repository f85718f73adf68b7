import type { ActivitySlice } from './activity/slice.ts';
import type { ChartsSlice } from './charts/slice.ts';
import type { ClientsSlice } from './clients/slice.ts';
import type { ConnectionSlice } from './connection/slice.ts';
import type { EpisodesSlice } from './episodes/slice.ts';
import type { ModelsSlice } from './models/slice.ts';
import type { NavigationSlice } from './navigation/slice.ts';
import type { ResearchSlice } from './research/slice.ts';
import type { RunsSlice } from './runs/slice.ts';
import type { SwarmSlice } from './swarm/slice.ts';
import type { TimelineSlice } from './timeline/slice.ts';

/** The whole UI state: one slice per concern (shell concerns, then one per view), each with its state and actions. */
export type AppStore = ConnectionSlice &
  SwarmSlice &
  NavigationSlice &
  ActivitySlice &
  ModelsSlice &
  RunsSlice &
  ResearchSlice &
  ClientsSlice &
  EpisodesSlice &
  TimelineSlice &
  ChartsSlice;
