import { VIEWS, type ViewId, type ViewInfo } from '../../../../electron/common/views.ts';
import type { NavigationState } from './slice.ts';

function currentView(navigation: NavigationState): ViewInfo {
  return viewInfo(navigation.view);
}

function viewInfo(id: ViewId): ViewInfo {
  const info = VIEWS.find((view) => view.id === id);
  if (!info) throw new RangeError(`Unknown view ${id}`);
  return info;
}

export const navigationSelectors = { currentView, viewInfo };
