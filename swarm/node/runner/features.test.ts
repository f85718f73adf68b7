/**
 * Hot swap, cocktail weights, teams, task sources, reward modules, restart and the long-running SDKs, against the
 * REAL episode routes (testing/episode-server.ts) with real child processes. Waits are on the runner's events and
 * state, never on time.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openStore } from '../store/db.ts';
import { ClientRunner } from './runner.ts';
import { useRunnerFixture, waitForRuns, waitForState } from './testing/fixture.ts';
import { pythonExecutable } from './script.ts';
import { episodeSpecs, openTaskSource, parseJsonl } from './tasks.ts';
import { episodeFromEnv } from '../../../sdk/typescript/agentjet.ts';

const { setup, attachInline } = useRunnerFixture();
const REWARD_1 = 'console.log(JSON.stringify({ reward: 1 }));';
const SDK_DIR = fileURLToPath(new URL('../../../sdk/', import.meta.url));

function scratch(): string {
  return mkdtempSync(join(tmpdir(), 'agentjet-feat-'));
}

describe('hot swap', () => {
  it('new episodes run the new version; in-flight ones of the old version finish; each records its hash', async () => {
    const { runner, server, events } = await setup();
    const v1 = 'setTimeout(() => console.log(JSON.stringify({ reward: 1 })), 300);';
    const v2 = 'console.log(JSON.stringify({ reward: 2 }));';
    const first = await attachInline(runner, 'swap', 'agent.mjs', v1, { epochs: undefined, concurrency: 2 });
    await waitForRuns(runner, (r) => r.client === 'swap', 2);
    const second = await attachInline(runner, 'swap', 'agent.mjs', v2, { epochs: undefined, concurrency: 2 });
    expect(second.version).toBe(2);
    expect(second.scriptHash).not.toBe(first.scriptHash);
    await waitForRuns(runner, (r) => r.scriptHash === second.scriptHash, 3);
    await runner.detach('swap');
    // The UI drops it from its list on this event.
    expect(events).toContainEqual({ type: 'client-detached', data: { name: 'swap' } });

    const runs = runner.runs('swap');
    const firstNew = runs.findIndex((r) => r.scriptHash === second.scriptHash);
    expect(runs.slice(0, firstNew).every((r) => r.scriptHash === first.scriptHash && r.reward === 1)).toBe(true);
    // After the switch only old in-flight episodes (at most `concurrency`) may still end with the old hash.
    expect(runs.slice(firstNew).filter((r) => r.scriptHash === first.scriptHash).length).toBeLessThanOrEqual(2);
    expect(runs.filter((r) => r.scriptHash === second.scriptHash).every((r) => r.reward === 2)).toBe(true);
    expect(runs.every((r) => r.status === 'ended')).toBe(true);
    // The episode API stored each episode's script hash too: the one of the version that ran it.
    for (const run of runs) expect(server.episode(run.episodeIds[0])?.scriptHash).toBe(run.scriptHash);
  });

  it('with inFlight: abort, episodes of the old version are aborted with the reason', async () => {
    const { runner } = await setup();
    await attachInline(runner, 'swap', 'slow.mjs', "console.log('started'); setTimeout(() => {}, 60_000);", { epochs: undefined, concurrency: 1 });
    // Until the old version's episode has begun and its run is in flight.
    await waitForState(runner, () => runner.get('swap').counts.started === 1);
    await attachInline(runner, 'swap', 'fast.mjs', REWARD_1, { inFlight: 'abort', concurrency: 1, swap: true });
    await runner.settled('swap');
    const [old, ...rest] = runner.runs('swap');
    expect([old.status, old.code]).toEqual(['aborted', 'replaced']);
    expect(rest.map((r) => r.status)).toEqual(['ended']);
  });
});

describe('cocktail', () => {
  it('shares episodes 3:1 by weight (within ±0.1 of 0.75 over 32 episodes) and keeps per-script and per-task metrics', async () => {
    const { runner } = await setup({ maxConcurrency: 4 });
    const tasks = { inline: [{ id: 'x' }, { id: 'y' }] };
    await attachInline(runner, 'heavy', 'a.mjs', REWARD_1, { weight: 3, epochs: undefined, concurrency: 4, tasks });
    await attachInline(runner, 'light', 'b.mjs', 'console.log(JSON.stringify({ reward: 0 }));', { weight: 1, epochs: undefined, concurrency: 4, tasks });
    await waitForRuns(runner, () => true, 32);
    runner.pause('heavy');
    runner.pause('light');
    await Promise.all([runner.settled('heavy'), runner.settled('light')]);
    const heavy = runner.get('heavy');
    const light = runner.get('light');
    const share = heavy.counts.started / (heavy.counts.started + light.counts.started);
    expect(Math.abs(share - 0.75)).toBeLessThanOrEqual(0.1);
    expect(heavy.meanReward).toBe(1);
    expect(light.meanReward).toBe(0);
    expect(Object.keys(heavy.perTask).sort()).toEqual(['x', 'y']);
    expect(heavy.perTask.x.meanReward).toBe(1);
  });
});

describe('teams', () => {
  const TEAM = `
    const roles = process.env.AGENTJET_ROLES.split(',');
    for (const role of roles) {
      const suffix = '_' + role.toUpperCase();
      const res = await fetch(process.env['OPENAI_BASE_URL' + suffix] + '/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env['OPENAI_API_KEY' + suffix] },
        body: JSON.stringify({ model: process.env['AGENTJET_MODEL' + suffix], messages: [{ role: 'user', content: role }], max_tokens: 4 }),
      });
      if (!res.ok) process.exit(4);
    }
    const task = JSON.parse(process.env.AGENTJET_TASK);
    if (task.failVerifier) { console.error('verifier crashed'); process.exit(2); }
    console.log(JSON.stringify({ rewards: { proposer: 1, verifier: 0 } }));`;

  it('each role gets its own model and key; the roles are rewarded separately', async () => {
    const { runner, server } = await setup();
    // The verifier names the model by a host alias: to the runner, another model.
    await attachInline(runner, 'team', 'team.mjs', TEAM, { model: undefined, models: { proposer: 'tiny', verifier: 'gpt-4o-mini' } });
    await runner.settled('team');
    const [run] = runner.runs('team');
    expect([run.status, run.reward]).toEqual(['ended', 0.5]);
    // Episodes in role order: proposer, verifier.
    const [proposer, verifier] = run.episodeIds.map((id) => server.episode(id)!);
    expect([proposer.state, proposer.reward, verifier.state, verifier.reward]).toEqual(['ended', 1, 'ended', 0]);
    expect(run.episodeIds.map((id) => server.calls(id))).toEqual([1, 1]);
    expect(proposer.teamId).toMatch(/^team-/);
    expect(verifier.teamId).toBe(proposer.teamId);
    expect(runner.get('team').models).toEqual({ proposer: 'tiny', verifier: 'gpt-4o-mini' });
  });

  it('when one member fails, all the team’s episodes are aborted', async () => {
    const { runner, server } = await setup();
    await attachInline(runner, 'team', 'team.mjs', TEAM, {
      model: undefined,
      models: { proposer: 'tiny', verifier: 'gpt-4o-mini' },
      tasks: { inline: [{ id: 't', failVerifier: true }] },
    });
    await runner.settled('team');
    const [run] = runner.runs('team');
    expect([run.status, run.code]).toEqual(['aborted', 'script_failed']);
    expect(run.episodeIds.map((id) => server.episode(id)?.state)).toEqual(['aborted', 'aborted']);
    expect(run.episodeIds.map((id) => server.episode(id)?.abortReason)).toEqual([run.reason, run.reason]);
  });

  it('a team result missing a role aborts the whole team', async () => {
    const { runner, server } = await setup();
    await attachInline(runner, 'team', 'team.mjs', "console.log(JSON.stringify({ rewards: { proposer: 1 } }));", {
      model: undefined,
      models: { proposer: 'tiny', verifier: 'gpt-4o-mini' },
    });
    await runner.settled('team');
    const [run] = runner.runs('team');
    expect([run.status, run.code]).toEqual(['aborted', 'role_reward_missing']);
    expect(run.episodeIds.map((id) => server.episode(id)?.state)).toEqual(['aborted', 'aborted']);
  });
});

describe('task sources', () => {
  it('reports the line of a bad JSONL task', () => {
    expect(() => parseJsonl('{"id": 1}\n\n{"id": 2\n')).toThrow(expect.objectContaining({ name: 'TaskSourceError', line: 3 }));
    expect(() => parseJsonl('{"id": 1}\n{"question": "no id"}')).toThrow(expect.objectContaining({ name: 'TaskSourceError', line: 2 }));
    expect(() => parseJsonl('{"id": 1}\n{"id": 1}')).toThrow(expect.objectContaining({ name: 'TaskSourceError', line: 2 }));
    expect(() => parseJsonl('\n')).toThrow(expect.objectContaining({ name: 'TaskSourceError' }));
  });

  it('runs train tasks `repeat` times in a row and held-out tasks once as eval episodes', async () => {
    const dir = scratch();
    const file = join(dir, 'tasks.jsonl');
    writeFileSync(file, ['{"id": "a"}', '{"id": "h", "split": "eval"}', '{"id": "b"}'].join('\n'));
    const specs: string[] = [];
    for await (const s of episodeSpecs(await openTaskSource({ path: file }), 3, 1)) specs.push(`${s.taskId}:${s.kind}`);
    expect(specs).toEqual(['a:train', 'a:train', 'a:train', 'b:train', 'b:train', 'b:train', 'h:eval']);

    const { runner, server } = await setup();
    await runner.attach({ name: 'split', script: { content: REWARD_1, filename: 'a.mjs' }, tasks: { path: file }, model: 'tiny', repeat: 2, epochs: 1 });
    await runner.settled('split');
    const stored = runner.runs('split').map((r) => server.episode(r.episodeIds[0])!);
    expect(stored.map((e) => `${e.taskId}:${e.kind}`).sort()).toEqual(['a:train', 'a:train', 'b:train', 'b:train', 'h:eval']);
  });

  it('takes tasks from a generator module, called once per pass', async () => {
    const dir = scratch();
    const file = join(dir, 'gen.ts');
    writeFileSync(file, 'export default function* tasks(): Generator<{ id: string; n: number }> { for (let n = 0; n < 3; n++) yield { id: `g${n}`, n }; }\n');
    const ids: string[] = [];
    for await (const s of episodeSpecs(await openTaskSource({ path: file }), 1, 2)) ids.push(s.taskId);
    expect(ids).toEqual(['g0', 'g1', 'g2', 'g0', 'g1', 'g2']);
    writeFileSync(join(dir, 'bad.mjs'), 'export const nothing = 1;\n');
    await expect(openTaskSource({ path: join(dir, 'bad.mjs') })).rejects.toMatchObject({ name: 'TaskSourceError' });
  });

  it('a reward module computes the reward from the task and the agent’s answer', async () => {
    const dir = scratch();
    const rewardFile = join(dir, 'reward.ts');
    writeFileSync(rewardFile, 'export default ({ task, output }: { task: { answer: number }; output: { answer?: number } | null }) => (output?.answer === task.answer ? 1 : 0);\n');
    const { runner } = await setup();
    await attachInline(runner, 'graded', 'a.mjs', 'const t = JSON.parse(process.env.AGENTJET_TASK); console.log(JSON.stringify({ answer: t.guess }));', {
      rewardModule: rewardFile,
      tasks: { inline: [{ id: 'right', answer: 4, guess: 4 }, { id: 'wrong', answer: 4, guess: 5 }] },
    });
    await runner.settled('graded');
    expect(Object.fromEntries(runner.runs('graded').map((r) => [r.taskId, r.reward]))).toEqual({ right: 1, wrong: 0 });
  });

  it('refuses an attach with a bad task file, changing nothing', async () => {
    const dir = scratch();
    writeFileSync(join(dir, 'bad.jsonl'), '{"id": 1}\nnot json\n');
    const { runner } = await setup();
    await expect(runner.attach({ name: 'x', script: { content: REWARD_1, filename: 'a.mjs' }, tasks: { path: join(dir, 'bad.jsonl') }, model: 'tiny' })).rejects.toMatchObject({
      name: 'TaskSourceError',
      line: 2,
    });
    await expect(runner.attach({ name: 'x', script: { content: 'const x: = 1', filename: 'a.ts' }, tasks: { inline: [{ id: 1 }] }, model: 'tiny' })).rejects.toMatchObject({
      name: 'ScriptAttachError',
    });
    expect(runner.list()).toEqual([]);
  });
});

describe('restart', () => {
  it('a new runner on the same store re-attaches what was attached (paused stays paused), not what was detached', async () => {
    const { api, dataDir } = await setup();
    const db = openStore(join(dataDir, 'store.sqlite'));
    const first = new ClientRunner({ api, dataDir, scriptsDir: join(dataDir, 'scripts'), db });
    const kept = await first.attach({ name: 'kept', script: { content: REWARD_1, filename: 'a.mjs' }, tasks: { inline: [{ id: 1 }] }, model: 'tiny', concurrency: 1 });
    await waitForRuns(first, (r) => r.client === 'kept', 1);
    first.pause('kept', 'looking at it');
    await first.settled('kept');
    await first.attach({ name: 'gone', script: { content: REWARD_1, filename: 'b.mjs' }, tasks: { inline: [{ id: 1 }] }, model: 'tiny', epochs: 1 });
    await first.detach('gone');
    await first.close();

    const second = new ClientRunner({ api, dataDir, scriptsDir: join(dataDir, 'scripts'), db });
    expect(await second.restore()).toEqual(['kept']);
    expect(second.get('kept')).toMatchObject({ state: 'paused', reason: 'looking at it', scriptHash: kept.scriptHash, version: 2 });
    // Runs recorded before the restart are still there.
    expect(second.runs('kept').length).toBeGreaterThan(0);
    expect(second.runs('kept').every((r) => r.status === 'ended')).toBe(true);
    const again = await second.attach({ name: 'gone', script: { content: REWARD_1, filename: 'b.mjs' }, tasks: { inline: [{ id: 1 }] }, model: 'tiny', epochs: 1 });
    expect(again.version).toBe(2);
    await second.close();
    db.close();
  });
});

describe('SDK per-episode helpers', () => {
  it('read the episode (or a team role’s) variables, and name what is missing', () => {
    const env = {
      AGENTJET_TASK: '{"id":"t","q":1}',
      AGENTJET_EPISODE_KIND: 'eval',
      AGENTJET_EPISODE_ID_VERIFIER: 'ep-v',
      OPENAI_BASE_URL_VERIFIER: 'http://x/v1',
      OPENAI_API_KEY_VERIFIER: 'k',
      AGENTJET_MODEL_VERIFIER: 'm',
    };
    expect(episodeFromEnv('verifier', env)).toMatchObject({ task: { id: 't', q: 1 }, kind: 'eval', episodeId: 'ep-v', apiKey: 'k', model: 'm', anthropicBaseUrl: 'http://x' });
    expect(() => episodeFromEnv(undefined, env)).toThrow(expect.objectContaining({ name: 'AgentJetError' }));
  });
});

describe('long-running SDK clients', () => {
  async function runSdkClient(command: string, args: string[], env: Record<string, string>) {
    const child = spawn(command, args, { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = (await once(child, 'exit')) as [number];
    return { code, stdout, stderr };
  }

  /** Rewards come from the task (the length of its question), once the model answered: not from its text. */
  it('TypeScript: begins many episodes at once, ends each with its reward, aborts the one whose agent threw', async () => {
    const { server } = await setup();
    const dir = scratch();
    const file = join(dir, 'client.mts');
    writeFileSync(
      file,
      `import { SwarmClient } from ${JSON.stringify(join(SDK_DIR, 'typescript/agentjet.ts'))};
      const swarm = new SwarmClient();
      const tasks = [{ id: 'sdk-ts-a', q: 'x' }, { id: 'sdk-ts-b', q: 'yy' }, { id: 'sdk-ts-bad', q: '' }];
      const summary = await swarm.run(tasks, async (episode, task) => {
        if (task.id === 'sdk-ts-bad') throw new Error('tool exploded');
        const res = await fetch(episode.baseUrl + '/chat/completions', { method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer ' + episode.apiKey },
          body: JSON.stringify({ model: episode.model, messages: [{ role: 'user', content: task.q }], max_tokens: 4 }) });
        const text = (await res.json()).choices[0].message.content;
        return { reward: typeof text === 'string' ? task.q.length : -1 };
      }, { model: 'tiny', concurrency: 3, repeat: 2 });
      console.log(JSON.stringify(summary));`,
    );
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const out = await runSdkClient(process.execPath, ['--import', tsx, file], { AGENTJET_SWARM_URL: server.swarmUrl, AGENTJET_CLIENT_KEY: server.token });
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toMatchObject({ ended: 4, aborted: 2, errors: ['Error: tool exploded', 'Error: tool exploded'] });
    const rewards = (taskId: string) => server.episodesOfTask(taskId).map((e) => [e.state, e.reward]);
    expect(rewards('sdk-ts-a')).toEqual([['ended', 1], ['ended', 1]]);
    expect(rewards('sdk-ts-b')).toEqual([['ended', 2], ['ended', 2]]);
    expect(server.episodesOfTask('sdk-ts-bad').map((e) => [e.state, e.abortReason])).toEqual([
      ['aborted', 'Error: tool exploded'],
      ['aborted', 'Error: tool exploded'],
    ]);
  });

  it('Python (standard library): the same, with threads', async () => {
    const { server } = await setup();
    const dir = scratch();
    const file = join(dir, 'client.py');
    writeFileSync(
      file,
      `import json, sys
sys.path.insert(0, ${JSON.stringify(join(SDK_DIR, 'python'))})
import agentjet
swarm = agentjet.SwarmClient()
def agent(episode, task):
    if task["id"] == "sdk-py-bad":
        raise ValueError("tool exploded")
    answer = episode.chat([{"role": "user", "content": task["q"]}], max_tokens=4)["content"]
    return len(task["q"]) if isinstance(answer, str) else -1
summary = swarm.run([{"id": "sdk-py-a", "q": "xyz"}, {"id": "sdk-py-bad", "q": ""}], agent, model="tiny", concurrency=4, repeat=3)
print(json.dumps(summary))
`,
    );
    const out = await runSdkClient(pythonExecutable(), [file], { AGENTJET_SWARM_URL: server.swarmUrl, AGENTJET_CLIENT_KEY: server.token });
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toMatchObject({ ended: 3, aborted: 3, mean_reward: 3 });
    expect(server.episodesOfTask('sdk-py-a').map((e) => [e.state, e.reward])).toEqual([['ended', 3], ['ended', 3], ['ended', 3]]);
    expect(server.episodesOfTask('sdk-py-bad').map((e) => [e.state, e.abortReason])).toEqual(Array(3).fill(['aborted', 'ValueError: tool exploded']));
  });
});
