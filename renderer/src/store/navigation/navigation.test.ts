import { describe, expect, it } from 'vitest';
import { createAppStore } from '../index.ts';
import { navigationSelectors } from './selectors.ts';
import { hashOf, routeFromHash, viewFromHash } from './slice.ts';
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

  it('lists the views in sidebar order, Runs after Models, Research after Runs', () => {
    expect(VIEWS.map((view) => view.id)).toEqual(['swarm', 'models', 'runs', 'research', 'clients', 'episodes', 'timeline']);
  });

  it('keeps a place inside a view, and leaves it when another view is shown', () => {
    const store = createAppStore();
    store.getState().showView('runs', 'run-7');
    expect(store.getState().navigation).toEqual({ view: 'runs', path: 'run-7' });
    const before = store.getState().navigation;
    store.getState().showView('runs', 'run-7');
    expect(store.getState().navigation).toBe(before); // same place: no new state, no new history entry
    store.getState().stepView(1);
    expect(store.getState().navigation.path).toBe('');
    store.getState().showView('runs');
    expect(store.getState().navigation.path).toBe('');
  });
});

describe('viewFromHash', () => {
  it('reads #/view and ignores anything else', () => {
    expect(viewFromHash('#/timeline')).toBe('timeline');
    expect(viewFromHash('#/models&token=x')).toBe('models');
    expect(viewFromHash('#token=x')).toBeNull();
    expect(viewFromHash('#/research')).toBe('research');
    expect(viewFromHash('#/nowhere')).toBeNull();
    expect(viewFromHash('')).toBeNull();
  });

  it('reads the place inside a view, and writes it back the same way (a reload lands on the same page)', () => {
    expect(routeFromHash('#/runs/tiny-3')).toEqual({ view: 'runs', path: 'tiny-3' });
    expect(routeFromHash('#/runs/compare/a,b/')).toEqual({ view: 'runs', path: 'compare/a,b' });
    expect(routeFromHash('#/runs')).toEqual({ view: 'runs', path: '' });
    for (const hash of ['#/runs', '#/runs/tiny-3', '#/runs/compare/a,b'])
      expect(hashOf(routeFromHash(hash)!)).toBe(hash);
  });
});
