/**
 * The UI's read routes over real HTTP, beside the episode API they mirror: same page shape for search and list,
 * the merge view's document equal to the export but for the calls' bodies, and the answers to bad requests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiErrorBody, EpisodeGroupShare, MergeTotals } from '../../common/api.ts';
import type { EpisodeExport } from '../../common/timeline/export.ts';
import type { EpisodePage } from '../store/episode-list.ts';
import { insertEpisode } from '../store/episodes.ts';
import { recordTrainStep } from '../store/train-steps.ts';
import { storeEndedEpisode, tempStore } from '../store/testing/episodes.ts';
import { serveReadRoutes, type ReadRoutesServer } from './testing/read-routes.ts';

const TOKEN = 'test-token';
const store = tempStore('ui-routes');
let server: ReadRoutesServer;
let base: string;

beforeAll(async () => {
  storeEndedEpisode(store.db, 'ep-01', 'tiny', 'arith-7', 'calc-agent');
  storeEndedEpisode(store.db, 'ep-02', 'tiny', 'spell-1', 'echo');
  storeEndedEpisode(store.db, 'ep-03', 'big', 'arith-9', 'echo');
  insertEpisode(store.db, { id: 'ep-04', model: 'tiny', taskId: 'arith-live', kind: 'train', policyVersion: 1 });
  server = await serveReadRoutes(store.db, TOKEN);
  base = server.base;
});

afterAll(async () => {
  await server.close();
  store.close();
});

async function get<T>(path: string, token = TOKEN): Promise<{ status: number; body: T }> {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: (await res.json()) as T };
}

describe('GET /api/ui/episodes', () => {
  it('answers a search in the list page shape, rows as /api/episodes has them', async () => {
    const search = await get<EpisodePage>('/ui/episodes?q=ARITH&state=ended');
    expect(search.status).toBe(200);
    expect(search.body.total).toBe(2);
    const list = await get<EpisodePage>('/episodes?state=ended');
    expect(search.body.episodes).toEqual(list.body.episodes.filter((e) => e.taskId.startsWith('arith')));
    expect(search.body.episodes[0]).toMatchObject({ id: 'ep-03', calls: 2, savings: { naiveTokens: 16, mergedTokens: 9 } });
  });

  it('pages with limit and offset, bounded like the list', async () => {
    expect((await get<EpisodePage>('/ui/episodes?q=ep-0&limit=1&offset=1')).body).toMatchObject({
      total: 4,
      episodes: [{ id: 'ep-03' }],
    });
    const tooMany = await get<ApiErrorBody>('/ui/episodes?q=ep&limit=501');
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toMatchObject({ name: 'InvalidRequestError', field: 'limit' });
    expect((await get<ApiErrorBody>('/episodes?limit=501')).body.error.name).toBe('InvalidRequestError');
    expect((await get<ApiErrorBody>('/ui/episodes')).body.error).toMatchObject({ name: 'InvalidRequestError', field: 'q' });
  });

  it('is behind the control token', async () => {
    expect((await get<ApiErrorBody>('/ui/episodes?q=ep', 'wrong')).status).toBe(401);
  });
});

describe('GET /api/ui/savings', () => {
  it('sums the merged episodes of a model, or of all', async () => {
    const tiny = await get<MergeTotals>('/ui/savings?model=tiny');
    expect(tiny).toEqual({
      status: 200,
      body: { model: 'tiny', episodes: 2, calls: 4, naiveTokens: 32, mergedTokens: 18, savedTokens: 14, tokenRatio: 32 / 18 },
    });
    expect((await get<MergeTotals>('/ui/savings')).body).toMatchObject({ model: null, episodes: 3 });
  });
});

describe('GET /api/ui/episodes/:id/merge', () => {
  it('is the export with the calls’ messages, tools and token arrays left out', async () => {
    for (const mode of ['merged', 'naive']) {
      const merge = await get<EpisodeExport>(`/ui/episodes/ep-01/merge?mode=${mode}`);
      const full = await get<EpisodeExport>(`/episodes/ep-01/export?mode=${mode}`);
      expect(merge.status).toBe(200);
      const { calls, ...rest } = merge.body;
      const { calls: fullCalls, ...fullRest } = full.body;
      expect(rest).toEqual(fullRest);
      expect(fullCalls.map((c) => c.promptIds.length)).toEqual([5, 7]);
      expect(calls).toEqual(
        fullCalls.map((c) => ({ ...c, messages: [], tools: null, promptIds: [], generatedIds: [], logprobs: [], promptTokenTexts: [], generatedTokenTexts: [] })),
      );
    }
    expect((await get<EpisodeExport>('/ui/episodes/ep-01/merge')).body.timelines[0].tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('answers 404 for an unknown episode and 400 for an unknown mode', async () => {
    for (const path of ['/ui/episodes/nope/merge', '/episodes/nope/export', '/episodes/nope']) {
      const missing = await get<ApiErrorBody>(path);
      expect([missing.status, missing.body.error.name]).toEqual([404, 'NotFoundError']);
    }
    const badMode = await get<ApiErrorBody>('/ui/episodes/ep-01/merge?mode=fancy');
    expect([badMode.status, badMode.body.error.field]).toEqual([400, 'mode']);
  });
});

describe('GET /api/ui/episodes/:id/group', () => {
  beforeAll(() => {
    // Four repeats of one task (group = task), the same 9 tokens each: three trained in one step, one still queued.
    for (const id of ['ep-21', 'ep-22', 'ep-23', 'ep-24']) storeEndedEpisode(store.db, id, 'tiny', 'grp-task', 'calc-agent');
    recordTrainStep(store.db, { model: 'tiny', step: 1, policyVersion: 2, metrics: {}, createdAt: '2026-01-02T00:00:00.000Z' }, ['ep-21', 'ep-22', 'ep-23', 'ep-02']);
  });

  it('counts what the episodes one step trained together share, and the group as one prefix tree', async () => {
    const share = await get<EpisodeGroupShare>('/ui/episodes/ep-22/group');
    expect(share.status).toBe(200);
    // ep-02 was in the step but in another group: not counted.
    expect(share.body).toEqual({ groupId: 'grp-task', basis: 'step', episodes: 3, tokens: 9, sharedTokens: 9, groupMergedTokens: 27, groupTreeTokens: 9 });
  });

  it('before a step, counts the ended episodes queued in the same group; an episode with no other is alone', async () => {
    expect((await get<EpisodeGroupShare>('/ui/episodes/ep-24/group')).body).toMatchObject({ basis: 'alone', episodes: 1, sharedTokens: 0, groupTreeTokens: 9 });
    storeEndedEpisode(store.db, 'ep-25', 'tiny', 'grp-task', 'calc-agent');
    expect((await get<EpisodeGroupShare>('/ui/episodes/ep-24/group')).body).toMatchObject({ basis: 'queued', episodes: 2, sharedTokens: 9, groupMergedTokens: 18 });
  });

  it('answers 404 for an unknown episode', async () => {
    const missing = await get<ApiErrorBody>('/ui/episodes/nope/group');
    expect([missing.status, missing.body.error.name]).toEqual([404, 'NotFoundError']);
  });
});
