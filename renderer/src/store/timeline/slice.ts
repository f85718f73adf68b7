/**
 * The timeline merge view's state: which episode, its export (swarm/common/timeline/export.ts) and the layout
 * built from it once, the horizontal viewport (zoom, pan), the hovered token and the chosen call.
 * Zoom, pan and hover change many times a second: the canvas subscribes to them outside React.
 */
import type { StateCreator } from 'zustand';
import type { EpisodeGroupShare, MergeTotals } from '../../../../swarm/common/api.ts';
import type { EpisodeExport } from '../../../../swarm/common/timeline/export.ts';
import type { AppStore } from '../types.ts';
import { buildMergeLayout, type MergeLayout, type Viewport } from './layout.ts';

export type MergeMode = EpisodeExport['mode'];

export interface HoveredToken {
  rowIndex: number;
  position: number;
  /** Pointer position in the window (the tooltip is fixed-positioned: the rows' scroll box would clip it). */
  clientX: number;
  clientY: number;
}

export interface TimelineState {
  episodeId: string | null;
  mode: MergeMode;
  /** Bumps on every load: answers to older loads are dropped. */
  requestId: number;
  loading: boolean;
  error: string | null;
  doc: EpisodeExport | null;
  layout: MergeLayout | null;
  /** null until the canvas knows its width and fits the episode. */
  viewport: Viewport | null;
  hover: HoveredToken | null;
  selectedCallId: string | null;
  runSavings: MergeTotals | null;
  runSavingsError: string | null;
  groupShare: EpisodeGroupShare | null;
  groupShareError: string | null;
}

export interface TimelineActions {
  timelineRequested(episodeId: string, mode: MergeMode): number;
  timelineLoaded(requestId: number, doc: EpisodeExport): void;
  timelineFailed(requestId: number, message: string): void;
  timelineViewportChanged(viewport: Viewport): void;
  timelineHovered(hover: HoveredToken | null): void;
  timelineCallSelected(callId: string | null): void;
  runSavingsLoaded(savings: MergeTotals | null, error: string | null): void;
  groupShareLoaded(episodeId: string, share: EpisodeGroupShare | null, error: string | null): void;
}

export type TimelineSlice = { timeline: TimelineState } & TimelineActions;

export const initialTimelineState: TimelineState = {
  episodeId: null,
  mode: 'merged',
  requestId: 0,
  loading: false,
  error: null,
  doc: null,
  layout: null,
  viewport: null,
  hover: null,
  selectedCallId: null,
  runSavings: null,
  runSavingsError: null,
  groupShare: null,
  groupShareError: null,
};

export const createTimelineSlice: StateCreator<AppStore, [], [], TimelineSlice> = (set, get) => {
  const patch = (p: Partial<TimelineState>) => set((s) => ({ timeline: { ...s.timeline, ...p } }));
  return {
    timeline: initialTimelineState,
    timelineRequested: (episodeId, mode) => {
      const requestId = get().timeline.requestId + 1;
      const sameEpisode = get().timeline.episodeId === episodeId;
      patch({
        episodeId,
        mode,
        requestId,
        loading: true,
        error: null,
        // Switching merged ↔ naive keeps the old picture until the new one arrives; another episode clears it.
        ...(sameEpisode
          ? {}
          : {
              doc: null,
              layout: null,
              viewport: null,
              hover: null,
              selectedCallId: null,
              runSavings: null,
              runSavingsError: null,
              groupShare: null,
              groupShareError: null,
            }),
      });
      return requestId;
    },
    timelineLoaded: (requestId, doc) => {
      if (requestId !== get().timeline.requestId) return;
      patch({ loading: false, error: null, doc, layout: buildMergeLayout(doc), viewport: null, hover: null });
    },
    timelineFailed: (requestId, message) => {
      if (requestId !== get().timeline.requestId) return;
      patch({ loading: false, error: message });
    },
    timelineViewportChanged: (viewport) => patch({ viewport }),
    timelineHovered: (hover) => patch({ hover }),
    timelineCallSelected: (callId) => patch({ selectedCallId: callId }),
    runSavingsLoaded: (savings, error) => patch({ runSavings: savings, runSavingsError: error }),
    groupShareLoaded: (episodeId, share, error) => {
      // An answer for an episode no longer shown is dropped.
      if (get().timeline.episodeId === episodeId) patch({ groupShare: share, groupShareError: error });
    },
  };
};
