/**
 * `POST /api/studies/ask` on a real peer, the planner a scripted OpenAI-compatible endpoint: a planner that keeps
 * writing invalid plans, or cannot be reached, ends the study with the reason and nothing left running; a valid plan
 * (after an invalid one) becomes a running study, with the planner's attempts and rationale in its events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StudyDetail, StudySummary } from '../../common/research-api.ts';
import { PeerClient } from '../cli/peer-client.ts';
import { PeerRuntime } from '../runtime.ts';
import { closedEndpointUrl, startScriptedEndpoint } from './testing/scripted-endpoint.ts';

const repoFile = (path: string) => new URL(`../../../${path}`, import.meta.url).pathname;
const defaults = { model: 'builtin:tiny', script: repoFile('examples/calculator/agent.ts'), reward: repoFile('examples/calculator/reward.ts'), tasks: { calculator: { train: 100, eval: 4 } } };

const validStudy = {
  name: 'asked',
  question: 'Does training beat not training?',
  hypothesis: 'It does.',
  decision: { kind: 'difference', better: 'default', than: 'zero', minDifference: 0 },
  base: { ...defaults, training: { batchTasks: 1, groupSize: 2 } },
  stages: [{ name: 'main', steps: 50, seeds: 2, arms: [{ name: 'zero', training: { train: { learningRate: 0 } } }, { name: 'default' }] }],
  budget: { maxRuns: 4, maxWallMinutes: 60 },
  concurrency: 1,
};

let runtime: PeerRuntime;
let api: PeerClient;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentjet-ask-'));
  runtime = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'silent' });
  api = new PeerClient(runtime.urls.api, runtime.token);
});

afterAll(async () => {
  await runtime?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function ask(baseUrl: string): Promise<StudySummary> {
  return api.request<StudySummary>('POST', '/studies/ask', { question: 'Does training beat not training?', planner: { baseUrl, model: 'planner', apiKey: 'k' }, budget: { maxRuns: 4, maxWallMinutes: 60 }, defaults, baseDir: dataDir, maxAttempts: 2 });
}

async function settled(id: string, statuses: string[]): Promise<StudyDetail> {
  let detail: StudyDetail | undefined;
  await vi.waitFor(async () => {
    detail = await api.get<StudyDetail>(`/studies/${id}`);
    expect(statuses).toContain(detail.status);
  }, { timeout: 60_000, interval: 200 });
  return detail!;
}

describe('studies written by the LLM planner', () => {
  it('ends a study whose planner keeps writing invalid plans, with the reasons, and runs nothing', async () => {
    const endpoint = await startScriptedEndpoint(['not a plan', JSON.stringify({ rationale: 'x', study: { ...validStudy, seedz: 2 } })], { apiKey: 'k' });
    try {
      const created = await ask(endpoint.baseUrl);
      expect(created.status).toBe('planning');
      const detail = await settled(created.id, ['failed']);
      expect(detail.reason).toMatch(/invalid-plans/);
      expect(detail.studyRuns).toEqual([]);
      expect(detail.events.filter((e) => e.kind === 'plan')).toHaveLength(2);
      expect(endpoint.requests).toHaveLength(2);
    } finally {
      await endpoint.close();
    }
  });

  it('ends a study whose planner cannot be reached', async () => {
    const detail = await settled((await ask(await closedEndpointUrl())).id, ['failed']);
    expect(detail.reason).toMatch(/unreachable/);
    expect(detail.studyRuns).toEqual([]);
  });

  it('ends a study asked of this peer\'s own model when it hosts none', async () => {
    const created = await api.request<StudySummary>('POST', '/studies/ask', { question: 'q?', planner: { self: null }, defaults, baseDir: dataDir });
    const detail = await settled(created.id, ['failed']);
    expect(detail.reason).toMatch(/unreachable/);
  });

  it('runs the first valid plan, its rejected attempt and rationale recorded, and stops on request', async () => {
    const endpoint = await startScriptedEndpoint([JSON.stringify({ rationale: 'x', study: { ...validStudy, concurrency: 0 } }), JSON.stringify({ rationale: 'two arms, two seeds', study: validStudy })], { apiKey: 'k' });
    try {
      const created = await ask(endpoint.baseUrl);
      const running = await settled(created.id, ['running']);
      expect(running.name).toBe('asked');
      expect(running.events.map((e) => e.message).join('\n')).toMatch(/attempt 1: rejected: .*concurrency/);
      expect(running.events.map((e) => e.message).join('\n')).toMatch(/rationale: two arms, two seeds/);
      await vi.waitFor(async () => expect((await api.get<StudyDetail>(`/studies/${created.id}`)).studyRuns.length).toBe(4), { timeout: 30_000 });
      await api.request('POST', `/studies/${created.id}/stop`);
      const stopped = await settled(created.id, ['stopped']);
      expect(stopped.studyRuns.filter((r) => r.status === 'running')).toEqual([]);
      // A resume starts again the runs the stop cut short.
      const cutShort = stopped.studyRuns.filter((r) => r.status === 'stopped').map((r) => r.id);
      expect(cutShort.length).toBeGreaterThan(0);
      await api.request('POST', `/studies/${created.id}/resume`);
      const resumed = await api.get<StudyDetail>(`/studies/${created.id}`);
      expect(resumed.status).toBe('running');
      expect(resumed.studyRuns.filter((r) => cutShort.includes(r.id)).every((r) => r.status === 'pending' || r.status === 'running')).toBe(true);
      await api.request('POST', `/studies/${created.id}/stop`);
      await settled(created.id, ['stopped']);
    } finally {
      await endpoint.close();
    }
  }, 120_000);
});
