/**
 * The episode list's filters and sort on both list routes, the JSONL export over real HTTP, and hostile query values
 * answered 400 naming the parameter (never 500).
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiErrorBody } from '../../common/api.ts';
import { episodeExportSchema, type EpisodeExport } from '../../common/timeline/export.ts';
import type { EpisodePage } from '../store/episode-list.ts';
import { insertEpisode, updateEpisodeState } from '../store/episodes.ts';
import { storeEndedEpisode, tempStore } from '../store/testing/episodes.ts';
import { recordTrainStep } from '../store/train-steps.ts';
import { serveReadRoutes, type ReadRoutesServer } from '../control/testing/read-routes.ts';

const TOKEN = 'test-token';
const EPISODES = 1_200;
const START = Date.UTC(2026, 0, 1);
const store = tempStore('episode-routes');
let server: ReadRoutesServer;
let base: string;

beforeAll(async () => {
  store.db.transaction(() => {
    for (let i = 0; i < EPISODES; i++) {
      const id = `ep-${String(i).padStart(5, '0')}`;
      insertEpisode(store.db, {
        id,
        model: i % 2 === 0 ? 'tiny' : 'big',
        taskId: `task-${i % 10}`,
        kind: i % 5 === 0 ? 'eval' : 'train',
        policyVersion: Math.floor(i / 100),
        client: `c${i % 3}`,
        createdAt: new Date(START + i * 1000).toISOString(),
      });
      if (i % 11 !== 0) updateEpisodeState(store.db, id, { state: 'ended', reward: (i % 4) / 4 });
    }
  })();
  storeEndedEpisode(store.db, 'ep-full-01', 'tiny', 'full', 'calc');
  recordTrainStep(store.db, { model: 'tiny', step: 1, policyVersion: 1, metrics: {}, createdAt: new Date(START).toISOString() }, ['ep-00002', 'ep-00004']);
  server = await serveReadRoutes(store.db, TOKEN);
  base = server.base;
});

afterAll(async () => {
  await server.close();
  store.close();
});

const auth = { authorization: `Bearer ${TOKEN}` };

async function get<T>(path: string): Promise<{ status: number; body: T }> {
  const res = await fetch(`${base}${path}`, { headers: auth });
  return { status: res.status, body: (await res.json()) as T };
}

async function jsonl(path: string): Promise<{ status: number; type: string | null; records: EpisodeExport[] }> {
  const res = await fetch(`${base}${path}`, { headers: auth });
  const text = await res.text();
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    records: res.ok ? text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as EpisodeExport) : [],
  };
}

describe('GET /api/episodes and /api/ui/episodes: filters and sort', () => {
  it('filters by client, policy version, time window and several states', async () => {
    const page = await get<EpisodePage>(
      '/episodes?client=c1&policyVersion=3&createdFrom=2026-01-01T00:05:00Z&createdBefore=2026-01-01T00:06:00Z&state=ended,active&limit=500',
    );
    expect(page.status).toBe(200);
    const expected = Array.from({ length: 60 }, (_, k) => 300 + k).filter((i) => i % 3 === 1);
    expect(page.body.total).toBe(expected.length);
    expect(page.body.episodes.every((e) => e.client === 'c1' && e.policyVersion === 3)).toBe(true);
    expect(page.body.episodes[0].id).toBe(`ep-00${expected.at(-1)}`);
  });

  it('sorts by reward both ways with unrewarded episodes last, on the search route too', async () => {
    const desc = await get<EpisodePage>('/episodes?model=tiny&sort=reward-desc&limit=500&offset=0');
    expect(desc.body.episodes.map((e) => e.reward).slice(0, 2)).toEqual([1, 0.5]); // ep-full-01 has 1
    const asc = await get<EpisodePage>('/ui/episodes?q=ep-&model=tiny&sort=reward-asc&limit=3');
    expect(asc.body.episodes.map((e) => e.reward)).toEqual([0, 0, 0]);
    const last = await get<EpisodePage>(`/episodes?model=tiny&sort=reward-asc&limit=1&offset=${desc.body.total - 1}`);
    expect(last.body.episodes[0].reward).toBeNull();
    const oldest = await get<EpisodePage>('/ui/episodes?q=ep-0&sort=oldest&limit=1');
    expect(oldest.body.episodes[0].id).toBe('ep-00000');
  });

  it('selects a train step’s episodes by model and step, or listed ids', async () => {
    expect((await get<EpisodePage>('/episodes?model=tiny&step=1')).body.episodes.map((e) => e.id)).toEqual(['ep-00004', 'ep-00002']);
    expect((await get<EpisodePage>('/episodes?episodeIds=ep-00007,ep-00001')).body.total).toBe(2);
  });

  it.each([
    ['sort=sideways', 'sort'],
    ['sort=', 'sort'],
    ['policyVersion=-1', 'policyVersion'],
    ['policyVersion=1e3', 'policyVersion'],
    ['policyVersion=', 'policyVersion'],
    ['policyVersion=99999999999999999', 'policyVersion'],
    ['createdFrom=yesterday', 'createdFrom'],
    ['createdBefore=2026-13-45T99:00:00Z', 'createdBefore'],
    ['state=ended,exploded', 'state'],
    ['state=', 'state'],
    ['kind=both', 'kind'],
    ['client=', 'client'],
    [`client=${'x'.repeat(5_000)}`, 'client'],
    ['step=1', 'step'],
    ['model=tiny&step=one', 'step'],
    [`episodeIds=${Array.from({ length: 1_001 }, (_, i) => i).join(',')}`, 'episodeIds'],
    ['episodeIds=a,,b', 'episodeIds'],
    ['limit=0', 'limit'],
    ['limit=501', 'limit'],
    ['offset=-5', 'offset'],
    ["taskId=%27%20OR%201%3D1--&sort=newest%3BDROP%20TABLE%20episodes", 'sort'],
  ])('answers %s with 400 naming %s on the list, the search and the export', async (query, field) => {
    for (const path of [`/episodes?${query}`, `/ui/episodes?q=ep&${query}`, `/episodes.jsonl?${query}`]) {
      if (path.startsWith('/episodes.jsonl') && /(^|&)(sort|limit|offset)=/.test(query)) continue; // not export parameters
      const answer = await get<ApiErrorBody>(path);
      expect({ path, status: answer.status, error: answer.body.error }).toMatchObject({
        status: 400,
        error: { name: 'InvalidRequestError', field },
      });
    }
  });

  it('treats SQL in a value as a value', async () => {
    const answer = await get<EpisodePage>("/episodes?taskId=%27%20OR%201%3D1--&client=%25");
    expect(answer).toMatchObject({ status: 200, body: { total: 0 } });
    expect((await get<EpisodePage>('/episodes?limit=1')).body.total).toBe(EPISODES + 1);
  });
});

describe('GET /api/episodes.jsonl', () => {
  it('streams one export per line, oldest first, filtered', async () => {
    const all = await jsonl('/episodes.jsonl');
    expect(all.status).toBe(200);
    expect(all.type).toContain('application/x-ndjson');
    expect(all.records).toHaveLength(EPISODES + 1);
    expect(episodeExportSchema.safeParse(all.records[1]).success).toBe(true);
    const times = all.records.map((r) => r.episode.createdAt);
    expect([...times].sort()).toEqual(times);

    const run = await jsonl('/episodes.jsonl?model=tiny&createdFrom=2026-01-01T00:01:40Z&createdBefore=2026-01-01T00:03:20Z&state=ended');
    expect(run.records.map((r) => r.episode.id)).toEqual(
      Array.from({ length: 100 }, (_, k) => 100 + k)
        .filter((i) => i % 2 === 0 && i % 11 !== 0)
        .map((i) => `ep-${String(i).padStart(5, '0')}`),
    );
    expect((await jsonl('/episodes.jsonl?model=tiny&step=1&mode=naive')).records.map((r) => [r.episode.id, r.mode])).toEqual([
      ['ep-00002', 'naive'],
      ['ep-00004', 'naive'],
    ]);
    const none = await jsonl('/episodes.jsonl?client=nobody');
    expect(none).toMatchObject({ status: 200, records: [] });
  });

  it('stops when the client hangs up, and goes on serving', async () => {
    const received = await new Promise<number>((resolve, reject) => {
      const req = request(`${base}/episodes.jsonl`, { headers: auth }, (res) => {
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > 10_000) {
            req.destroy();
            resolve(bytes);
          }
        });
        res.on('error', () => undefined);
      });
      req.on('error', () => undefined);
      req.on('close', () => resolve(0));
      setTimeout(() => reject(new Error('no data')), 30_000);
      req.end();
    });
    expect(received).toBeGreaterThan(10_000);
    expect((await get<EpisodePage>('/episodes?limit=1')).status).toBe(200);
    expect((await jsonl('/episodes.jsonl?episodeIds=ep-00001')).records).toHaveLength(1);
  });

  it('answers a bad mode with 400', async () => {
    const answer = await get<ApiErrorBody>('/episodes.jsonl?mode=weird');
    expect(answer).toMatchObject({ status: 400, body: { error: { name: 'InvalidRequestError', field: 'mode' } } });
  });
});
