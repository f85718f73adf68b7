/**
 * The runner against the REAL episode routes (testing/episode-server.ts: builtin:tiny, the store, the gateway,
 * over HTTP) with real child processes: Node (JS and TS through tsx) and Python scripts. Rewards are computed
 * by the scripts from facts (the model answered), never from the model's random text.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AttachClientRequest, RunAbortCode } from '../../common/runner-api.ts';
import { EpisodeApi } from './episode-api.ts';
import { useRunnerFixture } from './testing/fixture.ts';

const { setup, setupWithDouble, attachInline } = useRunnerFixture();

/** Asks the model once (through the episode's key) and reports reward 1 when it answered. */
const JS_AGENT = `
const task = JSON.parse(process.env.AGENTJET_TASK);
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: process.env.AGENTJET_MODEL, messages: [{ role: 'user', content: task.question }], max_tokens: 4 }),
});
const answer = (await res.json()).choices[0].message.content;
console.log('the model said', JSON.stringify(answer));
console.log(JSON.stringify({ reward: typeof answer === 'string' ? 1 : 0, metrics: { turns: 1 } }));
`;

const TS_AGENT = `
interface Task { id: string; question: string }
const task: Task = JSON.parse(process.env.AGENTJET_TASK!);
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: process.env.AGENTJET_MODEL, messages: [{ role: 'user', content: task.question }], max_tokens: 4 }),
});
const answer: unknown = (await res.json()).choices[0].message.content;
console.log(JSON.stringify({ reward: typeof answer === 'string' ? 0.5 : 0 }));
`;

const PY_AGENT = `
import json, os, urllib.request
task = json.loads(os.environ["AGENTJET_TASK"])
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": os.environ["AGENTJET_MODEL"], "messages": [{"role": "user", "content": task["question"]}], "max_tokens": 4}).encode(),
    headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
answer = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
print(json.dumps({"reward": 0.25 if isinstance(answer, str) else 0, "success": True}))
`;

describe('per-episode scripts', () => {
  it.each([
    ['agent.mjs', JS_AGENT, 1],
    ['agent.ts', TS_AGENT, 0.5],
    ['agent.py', PY_AGENT, 0.25],
  ])('%s gets its episode, calls the model with the episode key and its reward ends the episode', async (filename, content, reward) => {
    const { server, runner } = await setup();
    await attachInline(runner, 'agent', filename, content);
    const status = await runner.settled('agent');
    const runs = runner.runs('agent');
    expect(runs.map((r) => [r.status, r.code ?? null])).toEqual([['ended', null]]);
    expect(runs[0].reward).toBe(reward);
    const id = runs[0].episodeIds[0];
    expect(server.episode(id)).toMatchObject({ state: 'ended', reward, taskId: 't1', kind: 'train', client: 'agent', scriptHash: status.scriptHash });
    expect(server.calls(id)).toBe(1);
    expect(status).toMatchObject({ state: 'finished', counts: { started: 1, ended: 1, aborted: 0 }, meanReward: reward });
  });

  it('a script hard-coding another model name works when attached with an alias its host serves', async () => {
    const { server, runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'gpt-4o-mini'");
    await attachInline(runner, 'aliased', 'agent.mjs', script, { aliases: ['gpt-4o-mini'] });
    await runner.settled('aliased');
    const [run] = runner.runs('aliased');
    expect(run.status).toBe('ended');
    expect(server.episode(run.episodeIds[0])?.state).toBe('ended');
  });

  it('an alias the host does not serve is given to each episode, and the script using it gets answers', async () => {
    const { server, runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'claude-3'");
    await attachInline(runner, 'episode-alias', 'agent.mjs', script, { aliases: ['claude-3'] });
    await runner.settled('episode-alias');
    const [run] = runner.runs('episode-alias');
    expect([run.status, run.reward]).toEqual(['ended', 1]);
    expect(server.episode(run.episodeIds[0])).toMatchObject({ state: 'ended', model: 'tiny' });
    expect(server.calls(run.episodeIds[0])).toBe(1);
  });

  it('without the alias the same script’s call is refused by the gateway, so its episode is aborted', async () => {
    const { runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'claude-3'");
    await attachInline(runner, 'no-alias', 'agent.mjs', script);
    await runner.settled('no-alias');
    expect(runner.runs('no-alias').map((r) => [r.status, r.code])).toEqual([['aborted', 'script_failed']]);
  });

  it('aliases for a model nobody hosts are refused at attach, before any episode fails on it', async () => {
    const { runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'claude-3'");
    await expect(attachInline(runner, 'unhosted', 'agent.mjs', script, { model: 'claude-3', aliases: ['claude-3'] })).rejects.toMatchObject({ name: 'ModelNotHostedError' });
    expect(runner.list()).toEqual([]);
    expect(runner.runs()).toEqual([]);
  });

  it('a stopped runner refuses to attach with RunnerStoppedError', async () => {
    const { runner } = await setup();
    await runner.close();
    await expect(attachInline(runner, 'late', 'agent.mjs', JS_AGENT)).rejects.toMatchObject({ name: 'RunnerStoppedError' });
  });
});

describe('failures abort the episode with a code and the reason, and the runner goes on', () => {
  const cases: [string, string, string, Partial<AttachClientRequest>, RunAbortCode][] = [
    ['crash', 'crash.mjs', "throw new Error('boom');", {}, 'script_failed'],
    ['killed', 'killed.mjs', "process.kill(process.pid, 'SIGKILL');", {}, 'script_crashed'],
    ['garbage', 'garbage.mjs', "console.log('the answer is probably 4');", {}, 'no_result'],
    ['wrong-shape', 'shape.py', 'print(\'{"score": 1}\')', {}, 'no_result'],
    ['time-limit', 'slow.mjs', "console.log('working'); setInterval(() => console.log('still working'), 50);", { timeLimitS: 0.5 }, 'time_limit'],
    ['hang', 'hang.mjs', 'setInterval(() => {}, 1000);', { outputIdleS: 0.3 }, 'output_idle'],
    ['team-shape', 'team.mjs', "console.log(JSON.stringify({ rewards: { a: 1 } }));", {}, 'no_result'],
  ];
  it.each(cases)('%s', async (name, filename, content, extra, code) => {
    const { server, runner } = await setup();
    await attachInline(runner, name, filename, content, extra);
    await attachInline(runner, 'good', 'good.mjs', JS_AGENT);
    await Promise.all([runner.settled(name), runner.settled('good')]);
    const [bad] = runner.runs(name);
    expect([bad.status, bad.code]).toEqual(['aborted', code]);
    expect(server.episode(bad.episodeIds[0])).toMatchObject({ state: 'aborted', abortReason: bad.reason });
    expect(runner.runs('good').map((r) => r.status)).toEqual(['ended']);
  });

  it('kills the whole process tree at the time limit, helpers included', async () => {
    const { runner } = await setup();
    const script = `
      import { spawn } from 'node:child_process';
      const helper = spawn('sleep', ['30'], { stdio: 'ignore' });
      console.log('helper', helper.pid);
      setInterval(() => {}, 1000);`;
    // Long enough for node to start and print the helper's pid on a busy machine.
    await attachInline(runner, 'tree', 'tree.mjs', script, { timeLimitS: 4, sandbox: false });
    await runner.settled('tree');
    const [run] = runner.runs('tree');
    expect(run.code).toBe('time_limit');
    const pid = Number(/helper (\d+)/.exec(run.stdout)![1]);
    expect(isRunning(pid)).toBe(false);
  });

  it('retries a failed task with backoff, then the circuit breaker pauses the script and says why', async () => {
    const { server, runner, events } = await setup();
    await attachInline(runner, 'flaky', 'flaky.mjs', 'process.exit(3);', {
      tasks: { inline: [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }] },
      retries: 2,
      maxConsecutiveFailures: 4,
      concurrency: 1,
    });
    const status = await runner.settled('flaky');
    expect(status.state).toBe('broken');
    // Task "a" was retried (after a backoff, so other tasks ran meanwhile); b's failure tripped the breaker.
    expect(status.counts).toMatchObject({ started: 4, aborted: 4, retried: 4, consecutiveFailures: 4 });
    const runs = runner.runs('flaky');
    expect(runs.map((r) => r.code)).toEqual(['script_failed', 'script_failed', 'script_failed', 'script_failed']);
    const tried = runs.map((r) => r.taskId);
    expect(tried.filter((t) => t === 'a').length).toBeGreaterThanOrEqual(2);
    expect(tried.filter((t) => t === 'c' || t === 'd').length).toBeLessThan(2);
    expect(runs.every((r) => server.episode(r.episodeIds[0])?.state === 'aborted')).toBe(true);
    expect(events).toContainEqual({ type: 'client-paused', data: { name: 'flaky', reason: status.reason, breaker: true } });

    // A new version gives it another chance.
    await attachInline(runner, 'flaky', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));', { tasks: { inline: [{ id: 'a' }] }, swap: true });
    expect((await runner.settled('flaky')).state).toBe('finished');
  });

  it('a model nobody hosts is refused at attach, naming the hosted ones and the likely one', async () => {
    const { runner } = await setup();
    const refused = attachInline(runner, 'nowhere', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));', { model: 'tinyy' });
    await expect(refused).rejects.toMatchObject({ name: 'ModelNotHostedError', message: expect.stringContaining('"tiny"') });
    const team = attachInline(runner, 'team', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));', { model: undefined, models: { a: 'tiny', b: 'nobody' } });
    await expect(team).rejects.toMatchObject({ name: 'ModelNotHostedError' });
    expect(runner.list()).toEqual([]);
  });

  it('an unreachable status does not block the attach (back-pressure waits for the server)', async () => {
    const { runner } = await setup({ api: new EpisodeApi('http://127.0.0.1:1/swarm/v1', () => 'x') });
    expect((await attachInline(runner, 'later', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));')).name).toBe('later');
  });

  it('a model gone after the attach fails the run with begin_failed (the server said 404, not "busy")', async () => {
    const { runner, double } = await setupWithDouble();
    double.models.push({ name: 'leaving', aliases: [] });
    await attachInline(runner, 'nowhere', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));', { model: 'leaving', maxConsecutiveFailures: 1 });
    double.models.pop();
    const status = await runner.settled('nowhere');
    expect(status.state).toBe('broken');
    expect(runner.runs('nowhere').map((r) => [r.status, r.code, r.episodeIds])).toEqual([['aborted', 'begin_failed', []]]);
  });
});

describe('isolation', () => {
  const NODE_SNOOP = `
    import { readFileSync } from 'node:fs';
    const task = JSON.parse(process.env.AGENTJET_TASK);
    const tryRead = (p) => { try { return readFileSync(p, 'utf8'); } catch (e) { return 'DENIED ' + e.code; } };
    console.log(JSON.stringify({ env: process.env, identity: tryRead(task.identity), control: tryRead(task.control), cwd: process.cwd() }));
    console.log(JSON.stringify({ reward: 0 }));`;
  const PY_SNOOP = `
import json, os
task = json.loads(os.environ["AGENTJET_TASK"])
def try_read(p):
    try:
        return open(p).read()
    except Exception as e:
        return "DENIED " + type(e).__name__
print(json.dumps({"env": dict(os.environ), "identity": try_read(task["identity"]), "control": try_read(task["control"]), "cwd": os.getcwd()}))
print(json.dumps({"reward": 0}))
`;
  /** A neighbour in flight meanwhile, whose key must stay invisible: it prints it, then waits. */
  const NEIGHBOUR = "console.log(process.env.OPENAI_API_KEY); setTimeout(() => console.log(JSON.stringify({ reward: 1 })), 2000);";

  it.each([
    ['snoop.mjs', NODE_SNOOP],
    ['snoop.ts', NODE_SNOOP],
    ['snoop.py', PY_SNOOP],
  ])('%s sees only its own episode variables and cannot read the node secret or control token', async (filename, content) => {
    const { server, runner, dataDir } = await setup();
    await attachInline(runner, 'neighbour', 'wait.mjs', NEIGHBOUR);
    const task = { id: 'snoop', identity: join(dataDir, 'identity.json'), control: join(dataDir, 'control.json') };
    await attachInline(runner, 'snoop', filename, content, { tasks: { inline: [task] } });
    await Promise.all([runner.settled('snoop'), runner.settled('neighbour')]);
    const [run] = runner.runs('snoop');
    expect(run.status).toBe('ended');
    const seen = JSON.parse(run.stdout.split('\n')[0]) as { env: Record<string, string>; identity: string; control: string; cwd: string };
    expect(seen.identity).toMatch(/^DENIED/);
    expect(seen.control).toMatch(/^DENIED/);
    const names = Object.keys(seen.env).filter((k) => !['PWD', 'SHLVL', '_', 'LC_CTYPE'].includes(k));
    for (const name of names) expect(name).toMatch(/^(PATH|LANG|HOME|TMPDIR|PYTHONUNBUFFERED|PYTHONDONTWRITEBYTECODE|AGENTJET_[A-Z_]+|OPENAI_[A-Z_]+|ANTHROPIC_[A-Z_]+)$/);
    const text = JSON.stringify(seen.env);
    expect(text).not.toContain(server.token);
    const neighbourKey = runner.runs('neighbour')[0].stdout.split('\n')[0].trim();
    expect(neighbourKey.length).toBeGreaterThan(10);
    expect(text).not.toContain(neighbourKey);
    expect(seen.env.AGENTJET_EPISODE_ID).toBe(run.episodeIds[0]);
    expect(seen.cwd.startsWith(dataDir)).toBe(false);
    expect(seen.env.HOME.startsWith(seen.cwd)).toBe(true);
  });
});

/** Alive and not a zombie waiting for a reaper (containers often have none at pid 1). */
function isRunning(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}
