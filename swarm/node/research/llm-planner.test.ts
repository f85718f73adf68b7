/**
 * The LLM planner against real HTTP: a scripted OpenAI-compatible endpoint (retries with reasons, errors by code)
 * and the project's own gateway serving the built-in model, whose byte-level babble must be rejected, not trusted.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startTestPeer, type TestPeer } from '../gateway/testing/peer.ts';
import {
  endpointFromEnvironment,
  EXAMPLE_STUDY,
  extractObject,
  planStudy,
  PlannerError,
  planSystemPrompt,
  proposeNextStage,
  PLANNER_API_KEY_VARIABLE,
  PLANNER_MODEL_VARIABLE,
  PLANNER_URL_VARIABLE,
  type PlanOptions,
} from './llm-planner.ts';
import { parseStudy } from './study-file.ts';
import { closedEndpointUrl, startScriptedEndpoint, type ScriptedEndpoint, type ScriptedReply } from './testing/scripted-endpoint.ts';

const repoFile = (path: string) => new URL(`../../../${path}`, import.meta.url).pathname;
const SCRIPT = repoFile('examples/calculator/agent.ts');
const REWARD = repoFile('examples/calculator/reward.ts');
const DEFAULTS = { model: 'builtin:tiny', script: SCRIPT, reward: REWARD, tasks: { calculator: { train: 400, eval: 40 } } };
const BASE_DIR = repoFile('examples/studies');

/** Copied from examples/studies/kl-penalty.study.yaml, paths absolute: 2 arms x 3 seeds = 6 runs. */
function validStudy(): Record<string, unknown> {
  return {
    name: 'kl-penalty',
    question: 'Does a KL penalty towards the starting weights help the built-in calculator agent learn?',
    hypothesis: 'A KL penalty of 0.05 holds the policy near the pretrained weights and does not hurt over a short run.',
    decision: { kind: 'difference', better: 'kl-0.05', than: 'kl-0', minDifference: 0.05 },
    base: { model: 'builtin:tiny', script: SCRIPT, reward: REWARD, tasks: { calculator: { train: 400, eval: 40, seed: 7 } }, training: { batchTasks: 2, groupSize: 4 } },
    metric: { kind: 'final-eval-success' },
    stages: [
      {
        name: 'main',
        steps: 4,
        seeds: 3,
        arms: [
          { name: 'kl-0', training: { train: { klCoef: 0 } } },
          { name: 'kl-0.05', training: { train: { klCoef: 0.05 } } },
        ],
      },
    ],
    budget: { maxRuns: 12, maxWallMinutes: 120 },
    concurrency: 2,
  };
}

const fenced = (value: unknown) => `Here is the plan.\n\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\`\n`;
const validAnswer = () => fenced({ rationale: 'Two arms differing only in klCoef, three seeds each.', study: validStudy() });
const withUnknownKey = () => JSON.stringify({ rationale: 'A first try.', study: { ...validStudy(), seedz: 3 } });

let endpoint: ScriptedEndpoint | undefined;
afterEach(async () => {
  await endpoint?.close();
  endpoint = undefined;
});

async function scripted(script: ScriptedReply[], apiKey?: string): Promise<ScriptedEndpoint> {
  endpoint = await startScriptedEndpoint(script, { apiKey });
  return endpoint;
}

function options(at: ScriptedEndpoint | string, extra: Partial<PlanOptions> = {}): PlanOptions {
  return {
    question: 'Does a KL penalty help the calculator agent?',
    endpoint: { baseUrl: typeof at === 'string' ? at : at.baseUrl, apiKey: 'sk-test', model: 'planner' },
    baseDir: BASE_DIR,
    defaults: DEFAULTS,
    notebook: [{ question: 'Does groupSize 8 beat 4?', decision: 'supported', statement: 'groupSize 8 raised success by 0.1', studyId: 'group-size-1' }],
    budget: { maxRuns: 12, maxWallMinutes: 120 },
    ...extra,
  };
}

async function plannerError(promise: Promise<unknown>): Promise<PlannerError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toMatchObject({ name: 'PlannerError' });
  expect(err).toBeInstanceOf(PlannerError);
  return err as PlannerError;
}

const lastUser = (at: ScriptedEndpoint, i: number) => at.requests[i].body!.messages.filter((m) => m.role === 'user').at(-1)!.content;

describe('planStudy', () => {
  it('sends the reasons back and returns the plan the model corrected on the third attempt', async () => {
    const at = await scripted(['I would compare two KL coefficients.', withUnknownKey(), validAnswer()]);
    const result = await planStudy(options(at));

    expect(result.study.name).toBe('kl-penalty');
    expect(result.study.stages[0].arms?.map((a) => a.name)).toEqual(['kl-0', 'kl-0.05']);
    expect(result.value).toEqual(validStudy());
    expect(result.rationale).toBe('Two arms differing only in klCoef, three seeds each.');
    expect(result.attempts.map((a) => a.accepted)).toEqual([false, false, true]);
    expect(result.attempts[0].errors[0]).toMatch(/JSON/);
    expect(result.attempts[1].errors[0]).toContain('seedz');
    expect(result.attempts[2].errors).toEqual([]);

    expect(at.requests).toHaveLength(3);
    const [first, second, third] = at.requests.map((r) => r.body!);
    expect(at.requests[0]).toMatchObject({ path: '/v1/chat/completions', authorization: 'Bearer sk-test' });
    expect(first).toMatchObject({ model: 'planner', max_tokens: 4096 });
    expect(first.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(first.messages[1].content).toContain('Does a KL penalty help the calculator agent?');
    // The conversation grows by the rejected answer and its reasons.
    expect(second.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(second.messages[2].content).toBe('I would compare two KL coefficients.');
    expect(lastUser(at, 1)).toMatch(/^Your answer was not accepted:\n1\. /);
    expect(third.messages).toHaveLength(6);
    expect(third.messages[4].content).toBe(withUnknownKey());
    expect(lastUser(at, 2)).toContain('seedz');
    expect(lastUser(at, 2)).toContain('allowed');
  });

  it('gives the model the format, the defaults, the budget and the notebook', async () => {
    const at = await scripted([validAnswer()]);
    await planStudy(options(at));
    const system = at.requests[0].body!.messages[0].content;
    for (const key of ['decision', 'stages', 'earlyStop', 'klCoef', 'successive-halving', SCRIPT, 'maxRuns: 12', 'maxWallMinutes: 120', 'group-size-1', 'groupSize 8 raised success']) {
      expect(system).toContain(key);
    }
  });

  it('fails with invalid-plans after exactly maxAttempts answers that never validate', async () => {
    const at = await scripted(Array.from({ length: 5 }, () => withUnknownKey()));
    const err = await plannerError(planStudy(options(at, { maxAttempts: 4 })));
    expect(err.code).toBe('invalid-plans');
    expect(at.requests).toHaveLength(4);
    expect(err.attempts).toHaveLength(4);
    expect(err.attempts.every((a) => !a.accepted && a.errors.length > 0)).toBe(true);
    expect(err.message).toContain('seedz');
  });

  it('rejects a valid study that does not fit the budget it was given', async () => {
    const big = { ...validStudy(), budget: { maxRuns: 50 }, stages: [{ ...(validStudy().stages as object[])[0], seeds: 10 }] };
    const at = await scripted([JSON.stringify({ rationale: 'More seeds.', study: big }), validAnswer()]);
    const result = await planStudy(options(at));
    expect(result.attempts[0].errors.join('\n')).toMatch(/20 runs/);
    expect(result.attempts[0].errors.some((e) => e.startsWith('budget.maxRuns'))).toBe(true);
    expect(result.attempts[0].errors.some((e) => e.startsWith('budget.maxWallMinutes'))).toBe(true);
    expect(result.attempts[1].accepted).toBe(true);
  });

  it('rejects a comparison on one seed', async () => {
    const single = { ...validStudy(), stages: [{ ...(validStudy().stages as object[])[0], seeds: 1 }] };
    const at = await scripted([JSON.stringify({ rationale: 'Quick.', study: single }), validAnswer()]);
    const result = await planStudy(options(at));
    expect(result.attempts[0].errors).toEqual([expect.stringMatching(/^stages\.0\.seeds: /)]);
  });

  it('accepts a YAML answer', async () => {
    const yaml = `rationale: YAML this time.\nstudy:\n${EXAMPLE_STUDY.replace(/^/gm, '  ')
      .replace('../examples/calculator/agent.ts', SCRIPT)
      .replace('../examples/calculator/reward.ts', REWARD)}`;
    const at = await scripted([`\`\`\`yaml\n${yaml}\`\`\``]);
    const result = await planStudy(options(at));
    expect(result.study.base.script).toBe(SCRIPT);
    expect(result.rationale).toBe('YAML this time.');
  });

  it('says the endpoint is unreachable at once, without retrying', async () => {
    const err = await plannerError(planStudy(options(await closedEndpointUrl())));
    expect(err.code).toBe('unreachable');
    expect(err.attempts).toEqual([]);
    expect(err.message).toContain(PLANNER_URL_VARIABLE);
  });

  it('says the key was refused on HTTP 401', async () => {
    const at = await scripted([validAnswer()], 'sk-right');
    const err = await plannerError(planStudy(options(at)));
    expect(err.code).toBe('unauthorized');
    expect(err.message).toContain('Incorrect API key provided.');
    expect(err.message).toContain(PLANNER_API_KEY_VARIABLE);
    expect(at.requests).toHaveLength(1);
  });

  it('calls a body that is not a chat completion a bad response', async () => {
    const at = await scripted([{ rawBody: '<html>proxy error</html>' }, { status: 200, body: { choices: [] } }]);
    expect((await plannerError(planStudy(options(at)))).code).toBe('bad-response');
    expect((await plannerError(planStudy(options(at)))).code).toBe('bad-response');
  });

  it('times out a request the endpoint never answers, and stops when cancelled', async () => {
    const hang = (() => new Promise<Response>(() => {})) as typeof fetch;
    const slow = ((_url: string | URL | Request, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal!.reason)))) as typeof fetch;
    expect((await plannerError(planStudy(options('http://127.0.0.1:1/v1', { fetch: slow, timeoutMs: 50 })))).code).toBe('timeout');
    const cancel = new AbortController();
    const pending = planStudy(options('http://127.0.0.1:1/v1', { fetch: slow, signal: cancel.signal }));
    cancel.abort();
    expect((await plannerError(pending)).code).toBe('aborted');
    cancel.abort();
    expect((await plannerError(planStudy(options('http://127.0.0.1:1/v1', { fetch: hang, signal: cancel.signal })))).code).toBe('aborted');
  });
});

describe('proposeNextStage', () => {
  const studyValue = validStudy();
  const study = parseStudy(studyValue, BASE_DIR);
  const results = { stages: [{ name: 'main', arms: [{ name: 'kl-0', params: { 'train.klCoef': 0 }, mean: 0.4, ci: [0.3, 0.5], n: 3 }, { name: 'kl-0.05', params: { 'train.klCoef': 0.05 }, mean: 0.42, ci: [0.3, 0.54], n: 3 }] }] };
  const base = (at: ScriptedEndpoint) => ({ study, studyValue, results, endpoint: { baseUrl: at.baseUrl, apiKey: '', model: 'planner' }, baseDir: BASE_DIR });

  it('stops when the model says so', async () => {
    const at = await scripted(['{"action": "stop", "rationale": "The intervals overlap; more seeds would not separate them."}']);
    const next = await proposeNextStage(base(at));
    expect(next).toMatchObject({ action: 'stop', rationale: 'The intervals overlap; more seeds would not separate them.' });
    expect(at.requests[0].authorization).toBeUndefined();
    expect(at.requests[0].body!.messages[1].content).toContain('"mean": 0.42');
  });

  it('returns a valid stage after sending back the reasons an invalid one was rejected for', async () => {
    const reused = { name: 'main', steps: 8, seeds: 3, arms: [{ name: 'kl-0' }, { name: 'kl-0.05', training: { train: { klCoef: 0.05 } } }] };
    const stage = { ...reused, name: 'longer' };
    const at = await scripted([JSON.stringify({ action: 'stage', rationale: 'Longer runs.', stage: reused }), JSON.stringify({ action: 'stage', rationale: 'Longer runs.', stage })]);
    const next = await proposeNextStage(base(at));
    expect(next.action).toBe('stage');
    if (next.action !== 'stage') return;
    expect(next.stage).toEqual(stage);
    expect(next.study.stages.map((s) => s.name)).toEqual(['main', 'longer']);
    expect(next.attempts.map((a) => a.accepted)).toEqual([false, true]);
    expect(lastUser(at, 1)).toContain('stages');
    expect(at.requests[0].body!.messages[0].content).toContain('"kl-0.05"');
  });

  it('fails with invalid-plans when no stage validates', async () => {
    const at = await scripted(['{"action": "continue"}', '{"action": "stage", "rationale": "x", "stage": {"name": "s2"}}']);
    const err = await plannerError(proposeNextStage({ ...base(at), maxAttempts: 2 }));
    expect(err.code).toBe('invalid-plans');
    expect(err.attempts[0].errors.join(' ')).toContain('action');
    expect(err.attempts[1].errors.join(' ')).toContain('stages.1.steps');
  });
});

describe('answers and settings', () => {
  it('finds the first balanced JSON object in prose, fences and thinking', () => {
    expect(extractObject('Sure! {"a": {"b": "}"}} and then {"c": 1}')).toEqual({ a: { b: '}' } });
    expect(extractObject('<think>maybe {"draft": 1}</think>```json\n{"final": true}\n```')).toEqual({ final: true });
    expect(extractObject('{ rationale: unquoted, study: { name: x } }')).toEqual({ rationale: 'unquoted', study: { name: 'x' } });
    expect(extractObject('no object here')).toBeNull();
  });

  it('keeps its example a valid study', () => {
    expect(() => parseStudy(parseYaml(EXAMPLE_STUDY), BASE_DIR)).not.toThrow();
    expect(planSystemPrompt({ defaults: DEFAULTS, budget: {}, notebook: [] })).toContain('No budget was given');
  });

  it('reads the endpoint from the environment', () => {
    expect(endpointFromEnvironment({})).toBeNull();
    expect(endpointFromEnvironment({ [PLANNER_URL_VARIABLE]: 'http://127.0.0.1:8000/v1' })).toEqual({ baseUrl: 'http://127.0.0.1:8000/v1', apiKey: '', model: 'default' });
    expect(endpointFromEnvironment({ [PLANNER_URL_VARIABLE]: 'https://api.example/v1', [PLANNER_MODEL_VARIABLE]: 'big', [PLANNER_API_KEY_VARIABLE]: 'sk-1' })).toEqual({
      baseUrl: 'https://api.example/v1',
      apiKey: 'sk-1',
      model: 'big',
    });
  });
});

describe('against the gateway serving the built-in model', () => {
  let peer: TestPeer;
  beforeAll(async () => {
    peer = await startTestPeer();
  });
  afterAll(async () => {
    await peer?.stop();
  });

  async function gatewayEndpoint() {
    const episode = await peer.startEpisode({ model: 'tiny', taskId: 'plan', kind: 'eval' });
    expect(episode.baseUrl).toMatch(/\/v1$/);
    return { baseUrl: episode.baseUrl, apiKey: episode.apiKey, model: 'tiny' };
  }

  // The built-in model's context is 1024 byte tokens: the full planning prompt cannot fit, and the planner says so.
  it('says the planning prompt does not fit a short context', async () => {
    const err = await plannerError(planStudy({ ...options('unused'), endpoint: await gatewayEndpoint(), maxAttempts: 2, maxTokens: 64 }));
    expect(err.code).toBe('bad-response');
    expect(err.message).toContain(PLANNER_MODEL_VARIABLE);
  });

  it('rejects the model’s babble with reasons, retries, and gives up with invalid-plans', async () => {
    const err = await plannerError(
      planStudy({
        ...options('unused'),
        question: 'Does a KL penalty help?',
        endpoint: await gatewayEndpoint(),
        // A prompt short enough for the built-in model's context, so it really answers.
        systemPrompt: 'Answer with one JSON object {"rationale": "...", "study": {...}}.',
        maxAttempts: 2,
        maxTokens: 64,
      }),
    );
    expect(err.code).toBe('invalid-plans');
    expect(err.attempts).toHaveLength(2);
    expect(err.attempts.every((a) => !a.accepted && a.errors.length > 0)).toBe(true);
  });
});
