/**
 * The demo end to end on a tiny configuration: a real peer, real agent processes speaking to the gateway, the real
 * training loop. The agent asks the model one short question and reports a reward of its own; the demo must turn
 * those rewards into optimizer steps that change the weights and the policy version.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataPaths } from '../paths.ts';
import { openStoreReadOnly } from '../store/read-only.ts';
import { listEpisodes } from '../store/episode-list.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { trainStepEpisodes } from '../store/train-steps.ts';
import { DEFAULT_DEMO, demoPlan, runDemo, type DemoOptions, type DemoProgress } from './demo.ts';
import { demoSummary } from './demo-command.ts';
import { writeDemoReport } from './report.ts';

/** One chat call, then a reward the script decides: `REWARD` fixed, or varying so that groups differ. */
const agentScript = (reward: string) => `
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: process.env.AGENTJET_MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 }),
});
if (!res.ok) throw new Error('gateway answered ' + res.status);
await res.json();
console.log(JSON.stringify({ reward: ${reward} }));
`;

const tasks = [
  ...['a', 'b', 'c', 'd'].map((id) => ({ id, question: id })),
  { id: 'held-1', question: 'x', split: 'eval' },
  { id: 'held-2', question: 'y', split: 'eval' },
];

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-demo-'));
  writeFileSync(join(dir, 'varied.mjs'), agentScript('Math.random()'));
  writeFileSync(join(dir, 'constant.mjs'), agentScript('1'));
  writeFileSync(join(dir, 'tasks.jsonl'), tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const options = (over: Partial<DemoOptions>): DemoOptions => ({
  ...DEFAULT_DEMO,
  steps: 2,
  tasks: join(dir, 'tasks.jsonl'),
  reward: undefined,
  batchTasks: 1,
  groupSize: 2,
  evalConcurrency: 2,
  ...over,
});

describe('the demo’s plan', () => {
  it('bundles the project’s own Node agents, a user’s script only when asked, and never the Python game', () => {
    const bundled = (options: Partial<DemoOptions>) => demoPlan({ ...DEFAULT_DEMO, ...options }).tasks.map((t) => [t.name, t.bundle === true]);
    expect(bundled({ scenario: 'cocktail' })).toEqual([['calculator', true], ['guess', false]]);
    expect(bundled({ scenario: 'team' })).toEqual([['team', true]]);
    expect(bundled({ scenario: 'calculator', script: '/lab/agent.ts' })).toEqual([['calculator', false]]);
    expect(bundled({ scenario: 'calculator', script: '/lab/agent.ts', bundle: true })).toEqual([['calculator', true]]);
  });
});

describe('agentjet demo', () => {
  it('turns the agent’s rewards into training steps that change the weights, and reports them', async () => {
    const seen: DemoProgress['phase'][] = [];
    const result = await runDemo(options({ script: join(dir, 'varied.mjs'), out: join(dir, 'run') }), (p) => seen.push(p.phase));

    expect(result.steps).toBe(2);
    expect(result.policyVersionAfter).toBe(result.policyVersionBefore + 2);
    expect(result.weightsChanged).toBe(true);
    for (const step of result.stepRecords) {
      // Rewards drawn from (0, 1) reach the step's summary: neither all zero nor all one.
      expect(step.rewardMean).toBeGreaterThan(0);
      expect(step.rewardMean).toBeLessThan(1);
      expect(step.metrics.trainedTokens).toBeGreaterThan(0);
    }
    expect(result.evalBefore.episodes).toBe(2);
    expect(result.evalAfter.episodes).toBe(2);
    expect(seen).toContain('train');
    expect(seen[seen.length - 1]).toBe('done');

    const report = writeDemoReport(result);
    expect(readFileSync(report, 'utf8')).toContain('Held-out success');
    for (const file of ['reward.svg', 'loss.svg', 'kl.svg', 'clip.svg', 'throughput.svg', 'calls.svg', 'merge.svg', 'summary.json']) {
      expect(existsSync(join(dir, 'run', file))).toBe(true);
    }
  }, 300_000);

  it('runs the agents in a second peer process that reaches the model over the swarm (--two-process)', async () => {
    const result = await runDemo(options({ script: join(dir, 'varied.mjs'), out: join(dir, 'two'), steps: 1, twoProcess: true }));
    expect(result.agentsRun).toMatch(/^in peer process \d+/);
    expect(result.steps).toBe(1);
    expect(result.weightsChanged).toBe(true);
    expect(result.evalBefore.episodes).toBe(2);
    expect(result.evalAfter.episodes).toBe(2);
    // The client peer kept its own store: the runs of its agents are there, not in the server's folder.
    expect(existsSync(join(dir, 'two', 'client', 'agentjet.sqlite'))).toBe(true);
  }, 300_000);

  it('stops with DemoError when every group has the same reward (nothing to learn from)', async () => {
    const run = runDemo(options({ script: join(dir, 'constant.mjs'), out: join(dir, 'flat'), stallTimeoutS: 3 }));
    await expect(run).rejects.toMatchObject({ name: 'DemoError' });
  }, 300_000);

  it('trains the cocktail (a TypeScript and a Python agent) on one model, with each task’s figures kept apart', async () => {
    const out = join(dir, 'cocktail');
    const result = await runDemo({ ...DEFAULT_DEMO, scenario: 'cocktail', out, steps: 2, evalTasks: 3, trainTasks: 40, batchTasks: 2, groupSize: 2, evalConcurrency: 4 });
    expect(result.tasks.map((t) => t.name)).toEqual(['calculator', 'guess']);
    expect(result.steps).toBe(2);
    expect(result.weightsChanged).toBe(true);

    // Each task's held-out share is computed from its own eval episodes only (the store says which script ran each).
    const db = openStoreReadOnly(dataPaths(result.dataDir).store);
    try {
      const episodes = listEpisodes(db, { limit: 500 }).episodes;
      for (const task of result.tasks) {
        for (const [label, evaluation] of [['before', task.evalBefore], ['after', task.evalAfter]] as const) {
          const own = episodes.filter((e) => e.client === `eval-${label}-${task.name}`);
          expect(own).toHaveLength(3);
          expect(evaluation.episodes).toBe(3);
          expect(evaluation.successRate).toBeCloseTo(own.filter((e) => e.success === true).length / 3, 10);
        }
      }
      // Both tasks' train episodes reached the one model.
      const trained = episodes.filter((e) => e.kind === 'train');
      expect(new Set(trained.map((e) => e.client))).toEqual(new Set(['train-calculator', 'train-guess']));
      // Each task's trained episodes are its own, and together they are every episode the steps trained on.
      for (const task of result.tasks) expect(task.trainedEpisodes).toBe(trained.filter((e) => e.client === `train-${task.name}` && e.state === 'trained').length);
      expect(result.tasks.reduce((n, t) => n + t.trainedEpisodes, 0)).toBe(result.stepRecords.reduce((n, r) => n + r.episodes, 0));
    } finally {
      db.close();
    }
    const byTask = result.stepRecords.flatMap((r) => Object.keys(r.rolloutByTask));
    expect(new Set(byTask)).toEqual(new Set(['calculator', 'guess']));
    expect(result.eval_before).toBeCloseTo((result.tasks[0].evalBefore.successRate + result.tasks[1].evalBefore.successRate) / 2, 10);
    expect(readFileSync(writeDemoReport(result), 'utf8')).toContain('Each task apart');
  }, 300_000);

  it('trains a team’s two models, each only on its own role’s episodes and rewards', async () => {
    const out = join(dir, 'team');
    const result = await runDemo({ ...DEFAULT_DEMO, scenario: 'team', out, steps: 2, evalTasks: 3, trainTasks: 40, batchTasks: 2, groupSize: 2, evalConcurrency: 4 });
    expect(result.models.map((m) => m.name)).toEqual(['proposer', 'verifier']);
    // Each role starts from its own warm start.
    expect(result.model).toBe('proposer=builtin:tiny-team, verifier=builtin:tiny-verifier');
    for (const model of result.models) {
      expect(model.stepRecords).toHaveLength(2);
      expect(model.weightsChanged).toBe(true);
    }
    const roles = result.tasks[0].roles!;
    expect(Object.keys(roles)).toEqual(['proposer', 'verifier']);

    const db = openStoreReadOnly(dataPaths(result.dataDir).store);
    try {
      for (const model of result.models) {
        for (const record of model.stepRecords) {
          const trained = trainStepEpisodes(db, model.name, record.step).map((id) => getEpisode(db, id)!);
          expect(trained.length).toBeGreaterThan(0);
          // A role's model is updated from its own episodes only, each carrying that role's reward.
          expect(new Set(trained.map((e) => e.model))).toEqual(new Set([model.name]));
          expect(record.rewardMean).toBeCloseTo(trained.reduce((a, e) => a + (e.reward ?? 0), 0) / trained.length, 10);
        }
      }
      // Each held-out team run is one episode per role; a role's figure is the mean of its own episodes' rewards.
      const held = listEpisodes(db, { limit: 500 }).episodes.filter((e) => e.client === 'eval-after');
      for (const [role, figures] of Object.entries(roles)) {
        const own = held.filter((e) => e.model === role);
        expect(own).toHaveLength(3);
        expect(figures.after).toBeCloseTo(own.reduce((a, e) => a + (e.reward ?? 0), 0) / 3, 10);
      }
      // The script's metrics: each one's mean over the held-out episodes that reported it; held out, the verifier
      // judges a right and a wrong answer in every team run and reports its verdict on each apart.
      const metrics = result.tasks[0].metrics;
      const reported = held.filter((e) => e.model === 'proposer').map((e) => e.metrics ?? {});
      for (const [name, figures] of Object.entries(metrics)) {
        const values = reported.map((m) => m[name]).filter((v): v is number => typeof v === 'number');
        expect(figures.episodesAfter).toBe(values.length);
        if (values.length > 0) expect(figures.after).toBeCloseTo(values.reduce((a, v) => a + v, 0) / values.length, 10);
      }
      expect(metrics.verifier_right.episodesAfter).toBe(3);
      expect(metrics.accepted_if_right.episodesAfter).toBe(3);
      expect(metrics.accepted_if_wrong.episodesAfter).toBe(3);
      expect(metrics.verifier_right.after).toBeCloseTo(roles.verifier.after, 10);
      expect(demoSummary(result).tasks.team).toMatchObject({ roles: { proposer: roles.proposer, verifier: roles.verifier }, metrics: { verifier_right: { after: metrics.verifier_right.after } } });
    } finally {
      db.close();
    }
  }, 300_000);

  it('refuses a task file without held-out tasks', async () => {
    writeFileSync(join(dir, 'train-only.jsonl'), '{"id": "a"}\n');
    const run = runDemo(options({ script: join(dir, 'varied.mjs'), tasks: join(dir, 'train-only.jsonl'), out: join(dir, 'none') }));
    await expect(run).rejects.toMatchObject({ name: 'TaskFileError' });
  });
});
