/**
 * The runner against the episode API over real HTTP (a test double of the remote API, see
 * testing/episode-api-double.ts) with real child processes: Node (JS and TS through tsx) and Python scripts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AttachClientRequest } from '../../common/runner-api.ts';
import { useRunnerFixture } from './testing/fixture.ts';

const { setup, attachInline } = useRunnerFixture();

/** Asks the model once (through the episode's key) and reports reward 1 when it answered. */
const JS_AGENT = `
const task = JSON.parse(process.env.AGENTJET_TASK);
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: process.env.AGENTJET_MODEL, messages: [{ role: 'user', content: task.question }] }),
});
const answer = (await res.json()).choices[0].message.content;
console.log('the model said', answer);
console.log(JSON.stringify({ reward: answer.includes(task.question) ? 1 : 0, metrics: { turns: 1 } }));
`;

const TS_AGENT = `
interface Task { id: string; question: string }
const task: Task = JSON.parse(process.env.AGENTJET_TASK!);
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: process.env.AGENTJET_MODEL, messages: [{ role: 'user', content: task.question }] }),
});
const answer: string = (await res.json()).choices[0].message.content;
console.log(JSON.stringify({ reward: answer.includes(task.question) ? 0.5 : 0 }));
`;

const PY_AGENT = `
import json, os, urllib.request
task = json.loads(os.environ["AGENTJET_TASK"])
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": os.environ["AGENTJET_MODEL"], "messages": [{"role": "user", "content": task["question"]}]}).encode(),
    headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
answer = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
print(json.dumps({"reward": 0.25 if task["question"] in answer else 0, "success": True}))
`;

describe('per-episode scripts', () => {
  it.each([
    ['agent.mjs', JS_AGENT, 1],
    ['agent.ts', TS_AGENT, 0.5],
    ['agent.py', PY_AGENT, 0.25],
  ])('%s gets its episode, calls the model with the episode key and its reward ends the episode', async (filename, content, reward) => {
    const { double, runner } = await setup();
    await attachInline(runner, 'agent', filename, content);
    const status = await runner.settled('agent');
    const runs = runner.runs('agent');
    expect(runs.map((r) => [r.status, r.reason])).toEqual([['ended', null]]);
    expect(runs[0].reward).toBe(reward);
    const [episode] = double.list({ client: 'agent' });
    expect(episode).toMatchObject({ state: 'ended', reward, taskId: 't1', kind: 'train', calls: 1, scriptHash: status.scriptHash });
    expect(status).toMatchObject({ state: 'finished', counts: { started: 1, ended: 1, aborted: 0 }, meanReward: reward });
  });

  it('a script hard-coding another model name works when attached with an alias its host serves', async () => {
    const { double, runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'gpt-4o-mini'");
    await attachInline(runner, 'aliased', 'agent.mjs', script, { aliases: ['gpt-4o-mini'] });
    await runner.settled('aliased');
    expect(double.list({ client: 'aliased' }).map((e) => e.state)).toEqual(['ended']);
  });

  it('an alias the host does not serve is given to each episode, and the script using it gets answers', async () => {
    const { double, runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'claude-3'");
    await attachInline(runner, 'episode-alias', 'agent.mjs', script, { aliases: ['claude-3'] });
    await runner.settled('episode-alias');
    expect(runner.runs('episode-alias').map((r) => [r.status, r.reward])).toEqual([['ended', 1]]);
    expect(double.list({ client: 'episode-alias' })).toMatchObject([{ state: 'ended', model: 'tiny', calls: 1 }]);

    // Without the alias the same script's call is refused (404), so the episode is aborted.
    await attachInline(runner, 'no-alias', 'agent.mjs', script);
    await runner.settled('no-alias');
    expect(runner.runs('no-alias').map((r) => r.status)).toEqual(['aborted']);
  });

  it('aliases for a model nobody hosts are refused at attach, before any episode fails on it', async () => {
    const { double, runner } = await setup();
    const script = JS_AGENT.replace('process.env.AGENTJET_MODEL', "'claude-3'");
    await expect(attachInline(runner, 'unhosted', 'agent.mjs', script, { model: 'claude-3', aliases: ['claude-3'] })).rejects.toMatchObject({ name: 'ModelNotHostedError' });
    expect(runner.list()).toEqual([]);
    expect(double.list()).toEqual([]);
  });
});

describe('failures abort the episode with the reason and the runner goes on', () => {
  const cases: [string, string, string, Partial<AttachClientRequest>, RegExp][] = [
    ['crash', 'crash.mjs', "throw new Error('boom');", {}, /exited with code 1/],
    ['killed', 'killed.mjs', "process.kill(process.pid, 'SIGKILL');", {}, /crashed \(killed by SIGKILL\)/],
    ['garbage', 'garbage.mjs', "console.log('the answer is probably 4');", {}, /not JSON/],
    ['wrong-shape', 'shape.py', 'print(\'{"score": 1}\')', {}, /not \{"reward": number\}/],
    ['time-limit', 'slow.mjs', "console.log('working'); setInterval(() => console.log('still working'), 50);", { timeLimitS: 0.5 }, /time limit of 0.5 s/],
    ['hang', 'hang.mjs', 'setInterval(() => {}, 1000);', { outputIdleS: 0.3 }, /no output for 0.3 s/],
  ];
  it.each(cases)('%s', async (name, filename, content, extra, reason) => {
    const { double, runner } = await setup();
    await attachInline(runner, name, filename, content, extra);
    await attachInline(runner, 'good', 'good.mjs', JS_AGENT);
    await Promise.all([runner.settled(name), runner.settled('good')]);
    const [bad] = runner.runs(name);
    expect(bad.status).toBe('aborted');
    expect(bad.reason).toMatch(reason);
    const [episode] = double.list({ client: name });
    expect(episode.state).toBe('aborted');
    expect(episode.reason).toBe(bad.reason);
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
    expect(run.reason).toMatch(/time limit/);
    const pid = Number(/helper (\d+)/.exec(run.stdout)![1]);
    expect(isRunning(pid)).toBe(false);
  });

  it('retries a failed task with backoff, then the circuit breaker pauses the script and says why', async () => {
    const { runner, events, double } = await setup();
    await attachInline(runner, 'flaky', 'flaky.mjs', 'process.exit(3);', {
      tasks: { inline: [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }] },
      retries: 2,
      maxConsecutiveFailures: 4,
      concurrency: 1,
    });
    const status = await runner.settled('flaky');
    expect(status.state).toBe('broken');
    expect(status.reason).toMatch(/circuit breaker: 4 episodes failed in a row; last: the script exited with code 3/);
    // Task "a" was retried (after a backoff, so other tasks ran meanwhile); b's failure tripped the breaker.
    expect(status.counts).toMatchObject({ started: 4, aborted: 4, retried: 4 });
    const tried = runner.runs('flaky').map((r) => r.taskId);
    expect(tried.filter((t) => t === 'a').length).toBeGreaterThanOrEqual(2);
    expect(tried.filter((t) => t === 'c' || t === 'd').length).toBeLessThan(2);
    expect(double.list({ client: 'flaky', state: 'ended' })).toEqual([]);
    expect(events).toContainEqual({ type: 'client-paused', data: { name: 'flaky', reason: status.reason, breaker: true } });

    // Resuming gives it another chance.
    await attachInline(runner, 'flaky', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));', {
      tasks: { inline: [{ id: 'a' }] },
    });
    expect((await runner.settled('flaky')).state).toBe('finished');
  });

  it('retries begin when the server is busy, without counting it against the script', async () => {
    const { runner, double } = await setup();
    double.refuseBegins = 2;
    await attachInline(runner, 'patient', 'ok.mjs', 'console.log(JSON.stringify({ reward: 1 }));', { maxConsecutiveFailures: 1 });
    const status = await runner.settled('patient');
    expect(status.state).toBe('finished');
    expect(runner.runs('patient').map((r) => r.status)).toEqual(['aborted', 'aborted', 'ended']);
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

  it.each([
    ['snoop.mjs', NODE_SNOOP],
    ['snoop.ts', NODE_SNOOP],
    ['snoop.py', PY_SNOOP],
  ])('%s sees only its own episode variables and cannot read the node secret or control token', async (filename, content) => {
    const { runner, dataDir, double } = await setup();
    // A neighbour whose key must stay invisible.
    await attachInline(runner, 'neighbour', 'wait.mjs', "setTimeout(() => console.log(JSON.stringify({ reward: 1 })), 2000);", {});
    const task = { id: 'snoop', identity: join(dataDir, 'identity.json'), control: join(dataDir, 'control.json') };
    await attachInline(runner, 'snoop', filename, content, { tasks: { inline: [task] } });
    await runner.settled('snoop');
    const [run] = runner.runs('snoop');
    expect(run.status).toBe('ended');
    const seen = JSON.parse(run.stdout.split('\n')[0]) as { env: Record<string, string>; identity: string; control: string; cwd: string };
    expect(seen.identity).toMatch(/^DENIED/);
    expect(seen.control).toMatch(/^DENIED/);
    const names = Object.keys(seen.env).filter((k) => !['PWD', 'SHLVL', '_', 'LC_CTYPE'].includes(k));
    for (const name of names) expect(name).toMatch(/^(PATH|LANG|HOME|TMPDIR|PYTHONUNBUFFERED|PYTHONDONTWRITEBYTECODE|AGENTJET_[A-Z_]+|OPENAI_[A-Z_]+)$/);
    const text = JSON.stringify(seen.env);
    expect(text).not.toContain(double.token);
    const neighbour = double.list({ client: 'neighbour' })[0];
    expect(text).not.toContain(neighbour.apiKey);
    expect(seen.env.OPENAI_API_KEY).toBe(double.list({ client: 'snoop' })[0].apiKey);
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
