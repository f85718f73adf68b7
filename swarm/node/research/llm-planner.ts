/**
 * The LLM planner of the automated research system: a language model behind an OpenAI-compatible endpoint turns a
 * plain research question into a study (study-file.ts), and after each stage proposes the next stage or stops.
 *
 * The model never gets the last word: every answer is parsed and validated exactly as a study file is
 * (`parseStudy`), plus the budget the caller gave; a rejected answer goes back into the conversation with the
 * numbered reasons (the key, what it accepts) and the model is asked again, a bounded number of times. Only a
 * validated plan is ever returned; otherwise a PlannerError says what went wrong and what to fix.
 *
 *   const endpoint = endpointFromEnvironment();           // AGENTJET_PLANNER_URL / _MODEL / _API_KEY
 *   const { study, value, rationale } = await planStudy({ question, endpoint, baseDir, defaults, notebook, budget });
 */
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { z } from 'zod';
import { trainingConfigSchema } from '../training/config.ts';
import { parseStudy, plannedRuns, seedsOf, StudyFileError, studyFileSchema, type Study } from './study-file.ts';

// ---------------------------------------------------------------------------------------------------------------
// Public API

/** An OpenAI-compatible endpoint: the planner POSTs to `{baseUrl}/chat/completions`. */
export interface PlannerEndpoint {
  baseUrl: string;
  apiKey: string;
  model: string;
}

export const PLANNER_URL_VARIABLE = 'AGENTJET_PLANNER_URL';
export const PLANNER_MODEL_VARIABLE = 'AGENTJET_PLANNER_MODEL';
export const PLANNER_API_KEY_VARIABLE = 'AGENTJET_PLANNER_API_KEY';
/** The model name sent when none is configured: single-model local servers (llama.cpp, vLLM) ignore it. */
export const DEFAULT_PLANNER_MODEL = 'default';

/** Attempts in all (first + retries): two corrections fix most slips of a capable model; more rarely help. */
export const DEFAULT_MAX_ATTEMPTS = 3;
/** Per request: a long plan from a large local model can take a minute or two to generate. */
export const DEFAULT_TIMEOUT_MS = 120_000;
/** Room for the rationale and a study of several stages, with room to spare for a reasoning model's thinking. */
export const DEFAULT_MAX_TOKENS = 4096;

export interface PlannerBudget {
  maxRuns?: number;
  maxWallMinutes?: number;
}

export interface NotebookEntry {
  question: string;
  decision: string;
  statement: string;
  studyId: string;
}

/** What every planner call takes besides its own inputs. */
export interface PlannerCallOptions {
  endpoint: PlannerEndpoint;
  /** Folder relative paths in the plan are resolved against (the study's folder). */
  baseDir: string;
  /** Attempts in all (first + retries); default 3. */
  maxAttempts?: number;
  /** Per request timeout, default 120 s. */
  timeoutMs?: number;
  /** `max_tokens` of each request, default 4096. */
  maxTokens?: number;
  /** Replaces the built-in system prompt (a model with a short context, or trying other wording). */
  systemPrompt?: string;
  signal?: AbortSignal;
  fetch?: typeof fetch;
}

export interface PlanOptions extends PlannerCallOptions {
  question: string;
  /** What a plan may use: the default base run (model, script, reward, tasks) the planner should start from. */
  defaults: Record<string, unknown>;
  /** Findings of earlier studies (lab notebook), given to the model so it builds on them. */
  notebook: NotebookEntry[];
  /** Budget the plan must fit. */
  budget: PlannerBudget;
}

export interface PlanAttempt {
  attempt: number;
  /** The model's answer as it came. */
  raw: string;
  accepted: boolean;
  /** Why it was rejected (empty when accepted). */
  errors: string[];
}

export interface PlanResult {
  study: Study;
  /** The accepted plan object, as the model wrote it (what a study file would hold). */
  value: unknown;
  rationale: string;
  attempts: PlanAttempt[];
}

export interface ProposeOptions extends PlannerCallOptions {
  /** The validated study. */
  study: Study;
  /** The study's plain value (as written), which the proposed stage is appended to. */
  studyValue: unknown;
  /** Results so far, per stage: arms with params, per-arm metric mean/CI/n. */
  results: unknown;
  /** Budget the whole study, with the new stage, must fit (besides the study's own `budget`). */
  budget?: PlannerBudget;
  notebook?: NotebookEntry[];
}

export type NextStage =
  | { action: 'stop'; rationale: string; attempts: PlanAttempt[] }
  | {
      action: 'stage';
      /** The proposed stage as the model wrote it: append it to the study's `stages`. */
      stage: Record<string, unknown>;
      rationale: string;
      /** The study validated with the stage appended. */
      study: Study;
      attempts: PlanAttempt[];
    };

/** A next-stage answer before its attempts are attached. */
type NextStageAnswer = WithoutAttempts<NextStage>;
/** Omit over each member of a union (plain Omit would merge them). */
type WithoutAttempts<T> = T extends unknown ? Omit<T, 'attempts'> : never;

export type PlannerErrorCode = 'unreachable' | 'unauthorized' | 'bad-response' | 'invalid-plans' | 'timeout' | 'aborted';

export class PlannerError extends Error {
  override name = 'PlannerError';
  constructor(
    readonly code: PlannerErrorCode,
    message: string,
    /** The answers received before the error, each with why it was rejected. */
    readonly attempts: PlanAttempt[] = [],
  ) {
    super(message);
  }
}

/** The planner endpoint from the environment, or null when AGENTJET_PLANNER_URL is not set. */
export function endpointFromEnvironment(env: Record<string, string | undefined> = process.env): PlannerEndpoint | null {
  const baseUrl = env[PLANNER_URL_VARIABLE]?.trim();
  if (!baseUrl) return null;
  return {
    baseUrl,
    // Local servers take any key or none.
    apiKey: env[PLANNER_API_KEY_VARIABLE]?.trim() ?? '',
    model: env[PLANNER_MODEL_VARIABLE]?.trim() || DEFAULT_PLANNER_MODEL,
  };
}

/** Turns a research question into a validated study; throws PlannerError when no valid plan comes. */
export async function planStudy(options: PlanOptions): Promise<PlanResult> {
  const system = options.systemPrompt ?? planSystemPrompt(options);
  const { value, attempts } = await converse(options, system, `Research question: ${options.question}`, (answer) => {
    const envelope = planEnvelope(answer);
    if ('errors' in envelope) return envelope;
    const checked = checkStudy(envelope.study, options.baseDir, options.budget);
    if ('errors' in checked) return checked;
    return { value: { study: checked.study, value: envelope.study, rationale: envelope.rationale } };
  });
  return { ...value, attempts };
}

/** After a stage: the next stage to run (validated as part of the study) or a reasoned stop. */
export async function proposeNextStage(options: ProposeOptions): Promise<NextStage> {
  const original = options.studyValue;
  if (!isPlainObject(original) || !Array.isArray(original.stages)) {
    throw new TypeError('proposeNextStage: studyValue must be the study object as written, with its stages');
  }
  const stagesSoFar: unknown[] = original.stages;
  const system = options.systemPrompt ?? proposeSystemPrompt(options);
  const user = `Results so far:\n${capped(JSON.stringify(options.results, null, 2), MAX_RESULTS_CHARS)}\n\nPropose the next stage, or stop.`;
  const { value, attempts } = await converse<NextStageAnswer>(options, system, user, (answer) => {
    const envelope = nextEnvelope(answer);
    if ('errors' in envelope) return envelope;
    if (envelope.action === 'stop') return { value: { action: 'stop' as const, rationale: envelope.rationale } };
    const checked = checkStudy({ ...original, stages: [...stagesSoFar, envelope.stage] }, options.baseDir, options.budget ?? {});
    if ('errors' in checked) return checked;
    return { value: { action: 'stage' as const, stage: envelope.stage, rationale: envelope.rationale, study: checked.study } };
  });
  return { ...value, attempts };
}

// ---------------------------------------------------------------------------------------------------------------
// Prompts

/** Notebook entries shown to the model: the most recent ones; older findings cost context and rarely matter. */
const MAX_NOTEBOOK_ENTRIES = 30;
/** One notebook finding is a sentence or two; a longer one is cut rather than crowd out the format. */
const MAX_NOTEBOOK_ENTRY_CHARS = 600;
/** The results summary of a long study is cut at this length, so the prompt stays within a usual context. */
const MAX_RESULTS_CHARS = 24_000;

/** The study-file header's example with its budget written out (study-file.ts does not export it; a test parses it). */
export const EXAMPLE_STUDY = `name: kl-penalty
question: Does a KL penalty help the calculator agent?
hypothesis: A small KL penalty keeps the policy near its start and learns as well or better.
decision: { kind: difference, better: with-kl, than: no-kl, minDifference: 0.05 }
base:
  model: builtin:tiny
  script: ../examples/calculator/agent.ts
  reward: ../examples/calculator/reward.ts
  tasks: { calculator: { train: 400, eval: 40, seed: 7 } }
  training: { batchTasks: 2, groupSize: 4 }
metric: { kind: final-eval-success }
budget: { maxRuns: 6, maxWallMinutes: 60 }
stages:
  - name: main
    steps: 4
    seeds: 3
    arms:
      - { name: no-kl, training: { train: { klCoef: 0 } } }
      - { name: with-kl, training: { train: { klCoef: 0.01 } } }
`;

const ANSWER_SHAPE = '{ "rationale": "<why this design answers the question>", "study": { <the study> } }';
const NEXT_SHAPE =
  '{ "action": "stop", "rationale": "<why>" }  or  { "action": "stage", "rationale": "<why>", "stage": { <one stage> } }';

let formatCache: string | undefined;

/** The study format, derived from the validator itself so the prompt cannot drift from what is accepted. */
export function studyFormat(): string {
  formatCache ??= [
    'JSON Schema of a study (derived from the validator; unknown keys are rejected):',
    JSON.stringify(z.toJSONSchema(studyFileSchema, { io: 'input', unrepresentable: 'any' })),
    '',
    'JSON Schema of the training settings (`base.training` and an arm\'s `training`; a search space\'s keys are dotted paths into them, such as train.learningRate):',
    JSON.stringify(z.toJSONSchema(trainingConfigSchema, { io: 'input', unrepresentable: 'any' })),
    '',
    'Example study (YAML here; your answer is JSON):',
    EXAMPLE_STUDY,
  ].join('\n');
  return formatCache;
}

function budgetWords(budget: PlannerBudget): string {
  const parts = [
    budget.maxRuns === undefined ? null : `at most ${budget.maxRuns} runs in all`,
    budget.maxWallMinutes === undefined ? null : `at most ${budget.maxWallMinutes} minutes of wall time`,
  ].filter((p) => p !== null);
  if (parts.length === 0) return 'No budget was given; keep the study small (tens of runs at most).';
  const fields = [budget.maxRuns === undefined ? null : `maxRuns: ${budget.maxRuns}`, budget.maxWallMinutes === undefined ? null : `maxWallMinutes: ${budget.maxWallMinutes}`].filter(
    (p) => p !== null,
  );
  return `${parts.join(' and ')}. Write it into the study as budget: { ${fields.join(', ')} } (or less).`;
}

function notebookWords(notebook: readonly NotebookEntry[]): string {
  if (notebook.length === 0) return '(empty: no earlier studies)';
  return notebook
    .slice(-MAX_NOTEBOOK_ENTRIES)
    .map((e) => `- [${e.studyId}] ${capped(e.question, MAX_NOTEBOOK_ENTRY_CHARS)} -> ${e.decision}: ${capped(e.statement, MAX_NOTEBOOK_ENTRY_CHARS)}`)
    .join('\n');
}

const RULES = [
  'Write the decision criterion now, before any result exists: `decision` compares two arms of the last stage (kind difference: better, than, minDifference) or tests one against a threshold (kind threshold: arm, atLeast).',
  'Arms are training-config deltas over `base`: each arm has a unique name and sets only what it varies (usually `training`); keep a control arm that changes nothing the question is about.',
  'A comparison needs seeds: at least 2 per arm in the stage the decision is judged on (3 or more when the budget allows).',
  'Fit the budget: runs = (arms, +1 with includeBase, or a search\'s trials / grid points) x seeds, summed over the stages.',
  'Start `base` from the defaults below; keep their model, script, reward and tasks unless the question is about them, and keep their paths as given.',
  'Build on the lab notebook: do not repeat a study that already answered the question; use what it found.',
  'Use only the keys in the schema; names use letters, digits and . _ = , + - only.',
];

/** The system prompt of planStudy: format, rules, defaults, budget, notebook. */
export function planSystemPrompt(options: Pick<PlanOptions, 'defaults' | 'budget' | 'notebook'>): string {
  return [
    'You plan studies for AgentJet, which trains the LLM behind an agent with reinforcement learning. A study answers one research question with training runs and is written down, decision criterion included, before any run starts.',
    '',
    `Answer with exactly one JSON object (a \`\`\`json fence around it is fine), nothing else:\n${ANSWER_SHAPE}`,
    '',
    'Rules:',
    ...RULES.map((r, i) => `${i + 1}. ${r}`),
    '',
    studyFormat(),
    '',
    'Defaults (start `base` from these):',
    stringifyYaml(options.defaults).trimEnd(),
    '',
    `Budget: ${budgetWords(options.budget)}`,
    '',
    'Lab notebook (findings of earlier studies):',
    notebookWords(options.notebook),
  ].join('\n');
}

/** The system prompt of proposeNextStage: the study so far, what a stage may be, and when to stop. */
export function proposeSystemPrompt(options: Pick<ProposeOptions, 'study' | 'studyValue' | 'budget' | 'notebook'>): string {
  const decision = options.study.decision;
  const named = decision.kind === 'difference' ? [decision.better, decision.than] : [decision.arm];
  const mustHave = named.filter((n) => n !== 'best');
  return [
    'You run a study for AgentJet, which trains the LLM behind an agent with reinforcement learning. A stage has just finished. Decide whether the study needs another stage, or should stop because the results already answer its question (or more runs would not change the answer).',
    '',
    `Answer with exactly one JSON object (a \`\`\`json fence around it is fine), nothing else:\n${NEXT_SHAPE}`,
    '',
    'Rules:',
    '1. The decision criterion is fixed: it is judged on the last stage, so a new stage is the last stage and ' +
      (mustHave.length > 0 ? `must have arms named ${mustHave.map((n) => `"${n}"`).join(' and ')} (or includeBase for "base").` : 'its best arm is judged.'),
    '2. The stage name must differ from the earlier stages\' names; `from: best` starts its arms from the best arm of the stage before.',
    '3. Arms are training-config deltas; at least 2 seeds per arm.',
    `4. The whole study, the new stage included, must fit its budget (${options.study.budget.maxRuns} runs)${options.budget ? `; also: ${budgetWords(options.budget)}` : ''}.`,
    '',
    studyFormat(),
    '',
    'The study so far:',
    JSON.stringify(options.studyValue, null, 2),
    '',
    'Lab notebook (findings of earlier studies):',
    notebookWords(options.notebook ?? []),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// The conversation: ask, validate, send the reasons back, ask again

interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

type Checked<T> = { value: T } | { errors: string[] };

async function converse<T>(options: PlannerCallOptions, system: string, user: string, check: (answer: string) => Checked<T>): Promise<{ value: T; attempts: PlanAttempt[] }> {
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new RangeError(`maxAttempts must be a whole number of at least 1, got ${maxAttempts}`);
  const messages: ChatMessage[] = [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ];
  const attempts: PlanAttempt[] = [];
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const raw = await complete(options, messages, attempts);
    const checked = check(raw);
    if ('value' in checked) {
      attempts.push({ attempt, raw, accepted: true, errors: [] });
      return { value: checked.value, attempts };
    }
    const errors = checked.errors.map((e) => capped(e, MAX_REASON_CHARS));
    attempts.push({ attempt, raw, accepted: false, errors });
    messages.push({ role: 'assistant', content: raw }, { role: 'user', content: retryMessage(errors) });
  }
  const last = attempts.at(-1)!.errors;
  throw new PlannerError(
    'invalid-plans',
    `the planner model gave no valid answer in ${maxAttempts} attempt${maxAttempts === 1 ? '' : 's'}; the last was rejected because: ${last.join('; ')}. ` +
      `Try a more capable model (${PLANNER_MODEL_VARIABLE}), more attempts, a narrower question, or write the study file by hand.`,
    attempts,
  );
}

/** One reason of a rejected answer: a StudyFileError's allowed list can be long; the model needs its gist. */
const MAX_REASON_CHARS = 1500;

function retryMessage(errors: readonly string[]): string {
  return [
    'Your answer was not accepted:',
    ...errors.map((e, i) => `${i + 1}. ${e}`),
    'Answer again with one JSON object that fixes every point above; keep what was right.',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// Checking an answer

/** Starts of `{` tried when looking for the first JSON object: bounds the work on a long answer full of braces. */
const MAX_OBJECT_STARTS = 64;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The object an answer holds. Candidates in order: a ```yaml fence as a YAML document; each balanced `{…}` that
 * parses (JSON, or YAML flow for a model that drops quotes), fenced blocks first; each block and the whole answer as
 * a YAML document. The first candidate with one of `expected` keys wins (a YAML study is full of `{ … }` flow maps
 * that are not the answer), else the first candidate at all.
 */
export function extractObject(raw: string, expected: readonly string[] = ['study', 'action']): Record<string, unknown> | null {
  // A reasoning model's thinking may hold drafts; only what follows it is the answer.
  const text = raw.replace(/<think>[\s\S]*?<\/think>/g, '').trim();
  const fences = [...text.matchAll(/```([^\n]*)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1].trim().toLowerCase(), body: m[2] }));
  const blocks = [...fences.map((f) => f.body), text];
  let first: Record<string, unknown> | null = null;
  for (const found of candidates()) {
    if (expected.some((key) => key in found)) return found;
    first ??= found;
  }
  return first;

  function* candidates(): Generator<Record<string, unknown>> {
    for (const fence of fences) if (fence.lang === 'yaml' || fence.lang === 'yml') yield* yamlDocument(fence.body);
    for (const block of blocks) yield* balancedObjects(block);
    for (const block of blocks) yield* yamlDocument(block);
  }
}

function* yamlDocument(text: string): Generator<Record<string, unknown>> {
  const parsed = tryParse(() => parseYaml(text) as unknown);
  if (isPlainObject(parsed)) yield parsed;
}

function* balancedObjects(text: string): Generator<Record<string, unknown>> {
  let tries = 0;
  for (let start = text.indexOf('{'); start !== -1 && tries < MAX_OBJECT_STARTS; start = text.indexOf('{', start + 1), tries++) {
    const end = balancedEnd(text, start);
    if (end === -1) continue;
    const slice = text.slice(start, end + 1);
    const parsed = tryParse(() => JSON.parse(slice) as unknown) ?? tryParse(() => parseYaml(slice) as unknown);
    if (isPlainObject(parsed)) yield parsed;
  }
}

/** The index of the `}` closing the `{` at `start`, skipping braces inside JSON strings; -1 when unbalanced. */
function balancedEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i;
  }
  return -1;
}

function tryParse(parse: () => unknown): unknown {
  try {
    return parse();
  } catch {
    return undefined;
  }
}

const NO_OBJECT = `no JSON object found in the answer; answer with one JSON object ${ANSWER_SHAPE}`;

function planEnvelope(raw: string): { rationale: string; study: Record<string, unknown> } | { errors: string[] } {
  const answer = extractObject(raw, ['study']);
  if (!answer) return { errors: [NO_OBJECT] };
  const errors: string[] = [];
  if (typeof answer.rationale !== 'string' || answer.rationale.trim() === '') errors.push('rationale: required, a non-empty string saying why this design answers the question');
  if (!isPlainObject(answer.study)) {
    const keys = Object.keys(answer);
    errors.push(`study: required, an object holding the study (${Object.keys(studyFileSchema.shape).join(', ')})${keys.length ? `; the answer's object has keys ${keys.join(', ')}` : ''}`);
  }
  if (errors.length > 0) return { errors };
  return { rationale: (answer.rationale as string).trim(), study: answer.study as Record<string, unknown> };
}

type NextEnvelope = { action: 'stop'; rationale: string } | { action: 'stage'; rationale: string; stage: Record<string, unknown> };

function nextEnvelope(raw: string): NextEnvelope | { errors: string[] } {
  const answer = extractObject(raw, ['action']);
  if (!answer) return { errors: [`no JSON object found in the answer; answer with one JSON object: ${NEXT_SHAPE}`] };
  const errors: string[] = [];
  if (answer.action !== 'stop' && answer.action !== 'stage') errors.push(`action: must be "stop" or "stage", got ${JSON.stringify(answer.action) ?? 'nothing'}`);
  if (typeof answer.rationale !== 'string' || answer.rationale.trim() === '') errors.push('rationale: required, a non-empty string saying why');
  if (answer.action === 'stage' && !isPlainObject(answer.stage)) errors.push('stage: required with action "stage", an object holding one stage (name, steps, seeds, arms or search)');
  if (errors.length > 0) return { errors };
  const rationale = (answer.rationale as string).trim();
  return answer.action === 'stop' ? { action: 'stop', rationale } : { action: 'stage', rationale, stage: answer.stage as Record<string, unknown> };
}

/** A StudyFileError in words the model can act on: the key, the problem, and what the key accepts. */
function studyFileReason(err: StudyFileError): string {
  const allowed = err.allowed && !err.message.includes(err.allowed) ? ` (allowed: ${err.allowed})` : '';
  return `${err.key ?? 'the study'}: ${err.key ? err.message.slice(err.key.length + 2) : err.message}${allowed}`;
}

/** Validates a study as a study file is, then the caller's budget and the seeds a decision needs. */
function checkStudy(value: unknown, baseDir: string, budget: PlannerBudget): { study: Study } | { errors: string[] } {
  let study: Study;
  try {
    study = parseStudy(value, baseDir);
  } catch (err) {
    if (err instanceof StudyFileError) return { errors: [studyFileReason(err)] };
    throw err;
  }
  const errors = planProblems(study, budget);
  return errors.length > 0 ? { errors } : { study };
}

/**
 * What parseStudy cannot know: the budget this planner was given (a plan writes its own `budget`, which must not
 * exceed it), and enough seeds for the decision's confidence interval.
 */
export function planProblems(study: Study, budget: PlannerBudget): string[] {
  const errors: string[] = [];
  const planned = plannedRuns(study);
  if (budget.maxRuns !== undefined) {
    if (planned > budget.maxRuns) {
      errors.push(`stages: the stages plan ${planned} runs, more than the budget of ${budget.maxRuns} runs; plan fewer arms, seeds or trials`);
    }
    if (study.budget.maxRuns > budget.maxRuns) {
      errors.push(`budget.maxRuns: must be at most ${budget.maxRuns} (the budget given), got ${study.budget.maxRuns}; write budget: { maxRuns: ${budget.maxRuns} }`);
    }
  }
  if (budget.maxWallMinutes !== undefined && study.budget.maxWallMinutes > budget.maxWallMinutes) {
    errors.push(
      `budget.maxWallMinutes: must be at most ${budget.maxWallMinutes} (the budget given), got ${study.budget.maxWallMinutes}; write budget: { maxWallMinutes: ${budget.maxWallMinutes} }`,
    );
  }
  const last = study.stages.length - 1;
  if (seedsOf(study.stages[last]).length < MIN_DECISION_SEEDS) {
    errors.push(`stages.${last}.seeds: the decision is judged on this stage and needs at least ${MIN_DECISION_SEEDS} seeds per arm for a confidence interval`);
  }
  return errors;
}

/** A confidence interval of a mean needs at least two samples. */
const MIN_DECISION_SEEDS = 2;


// ---------------------------------------------------------------------------------------------------------------
// The endpoint

const completionSchema = z.object({
  choices: z
    .array(z.object({ message: z.object({ content: z.string().nullish() }) }))
    .min(1),
});

/** An endpoint's error text quoted in our message: enough to recognise it, not a page of HTML. */
const MAX_QUOTED_ERROR_CHARS = 300;

async function complete(options: PlannerCallOptions, messages: readonly ChatMessage[], attempts: PlanAttempt[]): Promise<string> {
  const { endpoint } = options;
  const fail = (code: PlannerErrorCode, message: string) => new PlannerError(code, message, [...attempts]);
  const base = endpoint.baseUrl.replace(/\/+$/, '');
  let url: URL;
  try {
    url = new URL(`${base}/chat/completions`);
  } catch {
    throw fail('unreachable', `the planner URL "${endpoint.baseUrl}" is not a URL; set ${PLANNER_URL_VARIABLE} to an OpenAI-compatible base URL such as http://127.0.0.1:8000/v1`);
  }
  if (options.signal?.aborted) throw fail('aborted', 'planning was cancelled');
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  const stopped = (err: unknown): PlannerError | null => {
    if (options.signal?.aborted) return fail('aborted', 'planning was cancelled');
    if (timeout.aborted) {
      return fail('timeout', `the planner endpoint ${base} did not answer within ${Math.round(timeoutMs / 1000)} s; check that its server is up and not overloaded, or allow more time (timeoutMs)`);
    }
    return err instanceof Error && err.name === 'AbortError' ? fail('aborted', 'planning was cancelled') : null;
  };
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (endpoint.apiKey) headers.authorization = `Bearer ${endpoint.apiKey}`;
  const body = JSON.stringify({ model: endpoint.model, messages, max_tokens: options.maxTokens ?? DEFAULT_MAX_TOKENS });

  let res: Response;
  let text: string;
  try {
    res = await (options.fetch ?? fetch)(url, { method: 'POST', headers, body, signal });
    text = await res.text();
  } catch (err) {
    throw stopped(err) ?? fail('unreachable', `cannot reach the planner endpoint at ${base} (${connectionReason(err)}); check ${PLANNER_URL_VARIABLE} and that the server is running`);
  }

  const json = tryParse(() => JSON.parse(text) as unknown);
  if (res.status === 401 || res.status === 403) {
    throw fail('unauthorized', `the planner endpoint ${base} refused the key (HTTP ${res.status}: ${errorText(json, text)}); check ${PLANNER_API_KEY_VARIABLE}`);
  }
  if (!res.ok) {
    const detail = `HTTP ${res.status}: ${errorText(json, text)}`;
    const fix =
      errorCode(json) === 'context_length_exceeded'
        ? `the planning prompt (${messages.reduce((n, m) => n + m.content.length, 0)} characters) does not fit the model's context; use a model with a longer context (${PLANNER_MODEL_VARIABLE})`
        : res.status === 404
          ? `check ${PLANNER_URL_VARIABLE} (an OpenAI base URL, usually ending in /v1) and ${PLANNER_MODEL_VARIABLE}`
          : `check the server at ${PLANNER_URL_VARIABLE} and ${PLANNER_MODEL_VARIABLE}`;
    throw fail('bad-response', `the planner endpoint ${base} answered ${detail}; ${fix}`);
  }
  const parsed = completionSchema.safeParse(json);
  if (!parsed.success) {
    throw fail(
      'bad-response',
      `the planner endpoint ${base} answered something other than a chat completion (${json === undefined ? 'not JSON' : 'no choices[0].message'}): ${capped(text, MAX_QUOTED_ERROR_CHARS)}; check that ${PLANNER_URL_VARIABLE} is an OpenAI-compatible base URL`,
    );
  }
  return parsed.data.choices[0].message.content ?? '';
}

function connectionReason(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as { code?: unknown; message?: unknown } | undefined) : undefined;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return err instanceof Error ? err.message : String(err);
}

function errorText(json: unknown, text: string): string {
  if (isPlainObject(json)) {
    const error = json.error;
    if (isPlainObject(error) && typeof error.message === 'string') return capped(error.message, MAX_QUOTED_ERROR_CHARS);
    if (typeof error === 'string') return capped(error, MAX_QUOTED_ERROR_CHARS);
    if (typeof json.message === 'string') return capped(json.message, MAX_QUOTED_ERROR_CHARS);
  }
  return capped(text.trim() || '(empty body)', MAX_QUOTED_ERROR_CHARS);
}

function errorCode(json: unknown): unknown {
  return isPlainObject(json) && isPlainObject(json.error) ? json.error.code : undefined;
}

function capped(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters cut)`;
}
