import { describe, expect, it } from 'vitest';
import type { ClientStatus } from '../../../../swarm/common/runner-api.ts';
import { createAppStore } from '../index.ts';
import { clientsSelectors } from './selectors.ts';
import { clientNameFromFile } from './slice.ts';

function status(
  name: string,
  version: number,
  ended: number,
  aborted = 0,
  state: ClientStatus['state'] = 'running',
): ClientStatus {
  return {
    name,
    state,
    reason: null,
    version,
    scriptHash: `hash-${version}`,
    scriptFile: `/data/scripts/${name}.ts`,
    runtime: 'node',
    models: { default: 'tiny' },
    weight: 1,
    concurrency: 2,
    repeat: 2,
    inFlight: 0,
    counts: { started: ended + aborted, ended, aborted, retried: 0, consecutiveFailures: 0 },
    meanReward: null,
    perTask: {},
  };
}

describe('clients slice', () => {
  it('names a dropped script after its file and remembers options for a hot swap under that name', () => {
    const store = createAppStore();
    store.getState().scriptDropped({ filename: 'my agent.ts', content: 'x' });
    expect(store.getState().clients.draft.name).toBe('my-agent');
    store.getState().attachDraftChanged({ model: 'tiny', tasksPath: '/t.jsonl', repeat: 8 });
    expect(clientsSelectors.isHotSwap(store.getState().clients)).toBe(false);
    store.getState().attachFinished(status('my-agent', 1, 0), 0);
    expect(store.getState().clients.attachNotice).toBe('Attached my-agent');
    expect(store.getState().clients.draft.script).toBeNull();

    // Later the user changes the form, then drops v2: the options used for v1 come back.
    store.getState().attachDraftChanged({ repeat: 1, tasksPath: '' });
    store.getState().scriptDropped({ filename: 'my agent.ts', content: 'y' });
    expect(store.getState().clients.draft).toMatchObject({ repeat: 8, tasksPath: '/t.jsonl', model: 'tiny' });
    expect(clientsSelectors.isHotSwap(store.getState().clients)).toBe(true);
    store.getState().attachFinished(status('my-agent', 2, 0), 1);
    expect(store.getState().clients.attachNotice).toBe('Hot-swapped my-agent to version 2');
    expect(store.getState().clients.list).toHaveLength(1);
  });

  it('measures episodes per second from the counts it saw, and the share that completed', () => {
    const store = createAppStore();
    store.getState().clientsLoaded([status('a', 1, 0)], 0);
    store.getState().clientUpdated(status('a', 1, 10), 2_000);
    store.getState().clientUpdated(status('a', 1, 18, 2), 4_000);
    expect(clientsSelectors.episodesPerSecond(store.getState().clients.throughput.a)).toBe(5);
    expect(clientsSelectors.completionRate(store.getState().clients.list[0])).toBe(0.9);
    expect(clientsSelectors.episodesPerSecond([])).toBeNull();
  });

  it('forgets a detached client and its selection', () => {
    const store = createAppStore();
    store.getState().clientsLoaded([status('a', 1, 0), status('b', 1, 0)], 0);
    store.getState().clientSelected('a');
    store.getState().clientRemoved('a');
    expect(store.getState().clients.list.map((c) => c.name)).toEqual(['b']);
    expect(store.getState().clients.selected).toBeNull();
  });
});

describe('attach request', () => {
  const draft = {
    name: 'echo',
    script: { filename: 'echo.ts', content: 'code' },
    tasksPath: '',
    inlineTasks: null,
    inlineTasksName: null,
    model: 'tiny',
    repeat: 2,
    concurrency: 3,
    weight: 1,
  };

  it('uploads content in a browser, sends the path in Electron, and names the field to fix', () => {
    expect(() => clientsSelectors.attachRequest(draft)).toThrow(
      expect.objectContaining({ name: 'AttachDraftError', field: 'tasksPath' }),
    );
    const body = clientsSelectors.attachRequest({ ...draft, tasksPath: ' /t.jsonl ' });
    expect(body).toMatchObject({
      name: 'echo',
      script: { content: 'code', filename: 'echo.ts' },
      tasks: { path: '/t.jsonl' },
      model: 'tiny',
      repeat: 2,
      concurrency: 3,
    });
    const electron = clientsSelectors.attachRequest({
      ...draft,
      script: { filename: 'echo.ts', path: '/home/me/echo.ts' },
      inlineTasks: [{ id: 1 }],
    });
    expect(electron.script).toEqual({ path: '/home/me/echo.ts' });
    expect(electron.tasks).toEqual({ inline: [{ id: 1 }] });
    expect(() => clientsSelectors.attachRequest({ ...draft, name: '-bad' })).toThrow(
      expect.objectContaining({ field: 'name' }),
    );
  });

  it('reads JSONL tasks and says which line is wrong', () => {
    expect(clientsSelectors.parseTaskLines('{"id":1}\n\n{"id":"b","q":2}\n')).toEqual([
      { id: 1 },
      { id: 'b', q: 2 },
    ]);
    expect(() => clientsSelectors.parseTaskLines('{"id":1}\nnope')).toThrow(
      expect.objectContaining({ name: 'AttachDraftError', message: expect.stringContaining('2') }),
    );
    expect(() => clientsSelectors.parseTaskLines('{"x":1}')).toThrow(
      expect.objectContaining({ field: 'inlineTasks' }),
    );
  });

  it('makes client names the API accepts', () => {
    expect(clientNameFromFile('/a/b/agent.v2.py')).toBe('agent.v2');
    expect(clientNameFromFile('__weird name!.mjs')).toBe('weird-name-');
    expect(clientNameFromFile('.ts')).toBe('agent');
  });
});
