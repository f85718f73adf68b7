/** Moving between views from inside a data view (the shell's navigation slice owns which view is shown). */
import { appStore } from '../../store/index.ts';
import type { ViewId } from '../../../../electron/common/views.ts';

export function showView(view: ViewId): void {
  appStore.getState().showView(view);
}
