import { describe, expect, it } from 'vitest';
import { createAppStore } from '../index.ts';
import { navigationSelectors } from './selectors.ts';
import { viewFromHash } from './slice.ts';
import { VIEWS } from '../../../../electron/common/views.ts';

describe('navigation slice', () => {
  it('starts on the Swarm view and shows the one asked for', () => {
    const store = createAppStore();
    expect(store.getState().navigation.view).toBe('swarm');
    store.getState().showView('episodes');
    expect(navigationSelectors.currentView(store.getState().navigation).label).toBe('Episodes');
  });

  it('steps through the views in sidebar order, wrapping at both ends', () => {
    const store = createAppStore();
    store.getState().stepView(-1);
    expect(store.getState().navigation.view).toBe(VIEWS[VIEWS.length - 1].id);
    store.getState().stepView(1);
    store.getState().stepView(1);
    expect(store.getState().navigation.view).toBe(VIEWS[1].id);
  });

  it('has no Research view (it comes later)', () => {
    expect(VIEWS.map((view) => view.id)).toEqual(['swarm', 'models', 'clients', 'episodes', 'timeline']);
  });
});

describe('viewFromHash', () => {
  it('reads #/view and ignores anything else', () => {
    expect(viewFromHash('#/timeline')).toBe('timeline');
    expect(viewFromHash('#/models&token=x')).toBe('models');
    expect(viewFromHash('#token=x')).toBeNull();
    expect(viewFromHash('#/research')).toBeNull();
    expect(viewFromHash('')).toBeNull();
  });
});
