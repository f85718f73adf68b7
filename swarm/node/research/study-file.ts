/**
 * A study: a research question answered by training runs on the swarm, written down before any result.
 *
 *   # kl-penalty.study.yaml
 *   name: kl-penalty
 *   question: Does a KL penalty help the calculator agent?
 *   hypothesis: A small KL penalty keeps the policy near its start and learns as well or better.
 *   decision: { kind: difference, better: with-kl, than: no-kl, minDifference: 0.05 }
 *   base:
 *     model: builtin:tiny
 *     script: ../examples/calculator/agent.ts
 *     reward: ../examples/calculator/reward.ts
 *     tasks: { calculator: { train: 400, eval: 40, seed: 7 } }
 *     training: { batchTasks: 2, groupSize: 4 }
 *   metric: { kind: final-eval-success }
 *   stages:
 *     - name: main
 *       steps: 4
 *       seeds: 3
 *       arms:
 *         - { name: no-kl, training: { train: { klCoef: 0 } } }
 *         - { name: with-kl, training: { train: { klCoef: 0.01 } } }
 *
 * A stage either lists its arms (config deltas over the base) or searches a space of knobs (grid, random,
 * successive halving / ASHA, TPE); a later stage may start from the best arm of the one before (`from: best`).
 * `parseStudy` validates everything at once and names the first bad key, its value and what it accepts
 * (StudyFileError); paths in the file are relative to the file's folder.
 */
import { readFileSync } from 'node:fs';
import { dirname, extname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { closestName } from '../../common/closest-name.ts';
import { parseTrainingOverrides, type TrainingConfigOverrides } from '../training/config.ts';
import { TrainingConfigError } from '../training/errors.ts';

export class StudyFileError extends Error {
  override name = 'StudyFileError';
  constructor(
    /** The dotted key that is wrong (`stages.0.arms.1.training.train.klCoef`), or null for the whole file. */
    readonly key: string | null,
    reason: string,
    /** What the key accepts, when that is short enough to say. */
    readonly allowed?: string,
  ) {
    super(key ? `${key}: ${reason}` : reason);
  }
}

/** Names of studies, arms and stages appear in file names, URLs and tables. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._=,+-]{0,79}$/;
const nameSchema = z.string().regex(NAME, 'letters, digits and . _ = , + - (up to 80, starting with a letter or digit)');
/** A study of more runs than this is a mistake in the file, not a plan (a day of runs on a lab is far fewer). */
const MAX_RUNS = 1000;
/** Seeds per arm: confidence intervals need at least 2; more than 20 is better spent on arms. */
const MAX_SEEDS = 20;
/** Steps per run: the training loop's own limit. */
const MAX_RUN_STEPS = 1_000_000;
/** A knob path: a training setting such as `train.learningRate` or `groupSize`. */
const KNOB = /^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$/;

const paramValueSchema = z.union([z.number(), z.string(), z.boolean()]);
const dimensionSchema = z.union([
  z.object({ values: z.array(paramValueSchema).min(1).max(100) }).strict(),
  z
    .object({ min: z.number(), max: z.number(), log: z.boolean().optional(), integer: z.boolean().optional() })
    .strict()
    .refine((d) => d.max > d.min, 'max must be greater than min')
    .refine((d) => !d.log || d.min > 0, 'a log range needs min > 0'),
]);
const spaceSchema = z.record(z.string().regex(KNOB, 'a training setting path such as train.learningRate'), dimensionSchema);

const trialCount = z.number().int().min(1).max(MAX_RUNS);
const searchSchema = z.discriminatedUnion('strategy', [
  z.object({ strategy: z.literal('grid'), space: spaceSchema, pointsPerRange: z.number().int().min(2).max(20).default(3) }).strict(),
  z.object({ strategy: z.literal('random'), space: spaceSchema, trials: trialCount }).strict(),
  z
    .object({
      strategy: z.literal('successive-halving'),
      space: spaceSchema,
      trials: trialCount,
      eta: z.number().int().min(2).max(10).default(2),
      minSteps: z.number().int().min(1).max(MAX_RUN_STEPS),
      asynchronous: z.boolean().default(false),
    })
    .strict(),
  z
    .object({
      strategy: z.literal('tpe'),
      space: spaceSchema,
      trials: trialCount,
      startupTrials: z.number().int().min(1).max(MAX_RUNS).default(4),
      gamma: z.number().gt(0).lt(1).default(0.25),
      candidates: z.number().int().min(1).max(1000).default(24),
    })
    .strict(),
]);

const tasksSchema = z.union([
  z.object({ file: z.string().min(1) }).strict(),
  z
    .object({
      calculator: z
        .object({ train: z.number().int().min(1).max(1_000_000), eval: z.number().int().min(1).max(100_000), seed: z.number().int().default(2026) })
        .strict(),
    })
    .strict(),
]);

/** What an arm may change besides training settings: the model, the script, its grader, its tasks. */
const runPartsSchema = {
  model: z.string().min(1).optional(),
  script: z.string().min(1).optional(),
  reward: z.string().min(1).optional(),
  tasks: tasksSchema.optional(),
  // Checked by the training settings' own schema (parseStudy), so its errors name the key and its range.
  training: z.unknown().optional(),
};

const armSchema = z.object({ name: nameSchema, ...runPartsSchema }).strict();

const baseSchema = z
  .object({
    model: z.string().min(1).default('builtin:tiny'),
    script: z.string().min(1),
    reward: z.string().min(1).optional(),
    tasks: tasksSchema,
    training: z.unknown().optional(),
    /** Held-out episodes in flight while a run is evaluated. */
    evalConcurrency: z.number().int().min(1).max(256).default(8),
    /** Eval episodes sample at this temperature (1: the policy as trained). */
    evalTemperature: z.number().min(0).max(10).default(1),
  })
  .strict();

const stageSchema = z
  .object({
    name: nameSchema,
    steps: z.number().int().min(1).max(MAX_RUN_STEPS),
    seeds: z.union([z.number().int().min(1).max(MAX_SEEDS), z.array(z.number().int().min(0).max(2 ** 31 - 1)).min(1).max(MAX_SEEDS)]),
    /** `base`: arms are deltas over the study's base; `best`: over the best arm of the stage before. */
    from: z.enum(['base', 'best']).default('base'),
    arms: z.array(armSchema).min(1).max(MAX_RUNS).optional(),
    search: searchSchema.optional(),
    /** Also run the stage's starting point itself as an arm named `base` (a control). */
    includeBase: z.boolean().default(false),
    /** Seed of the search's own sampling. */
    searchSeed: z.number().int().min(0).default(1),
  })
  .strict()
  .refine((s) => (s.arms ? 1 : 0) + (s.search ? 1 : 0) === 1, 'a stage has either arms or a search, not both and not neither');

const metricSchema = z
  .object({
    kind: z.enum(['final-eval-success', 'final-eval-reward', 'last-k-reward', 'eval-auc']),
    /** last-k-reward: the mean rollout reward of the last k steps. */
    k: z.number().int().min(1).max(10_000).default(3),
  })
  .strict();

const decisionSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('difference'),
      better: nameSchema,
      than: nameSchema,
      minDifference: z.number().default(0),
      confidence: z.number().gt(0.5).lt(1).default(0.95),
      test: z.enum(['welch', 'permutation']).default('welch'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('threshold'),
      /** An arm of the last stage, or `best`: the last stage's best arm. */
      arm: nameSchema,
      atLeast: z.number(),
      confidence: z.number().gt(0.5).lt(1).default(0.95),
    })
    .strict(),
]);

const budgetSchema = z
  .object({
    /** Runs the study may start in all (restarts not counted). */
    maxRuns: z.number().int().min(1).max(MAX_RUNS).default(200),
    /** Wall time of the whole study; runs still going when it is spent are stopped and the report says so. */
    maxWallMinutes: z.number().positive().max(60 * 24 * 30).default(60 * 24 * 7),
    /** Wall time of one run (the paper's cap: a day). */
    runWallMinutes: z.number().positive().max(60 * 24 * 7).default(60 * 24),
    /** A run with no first step by then is failed (the paper's 20 minutes). */
    firstStepMinutes: z.number().positive().max(60 * 24).default(20),
    /** A run whose next step takes longer than this has stalled. */
    stepMinutes: z.number().positive().max(60 * 24).default(30),
  })
  .strict();

const earlyStopSchema = z
  .object({
    /** Stop a run whose loss is not a finite number. */
    nanLoss: z.boolean().default(true),
    /** Stop a run whose KL to the starting weights exceeds this (null: never). */
    maxKl: z.number().positive().nullable().default(null),
    /** Stop a run whose rollout reward stays at or below `below` for `steps` steps after it was above it. */
    rewardCollapse: z.object({ below: z.number(), steps: z.number().int().min(1) }).strict().nullable().default(null),
    /** Stop a run whose rollout reward has not improved on its best for this many steps (null: never). */
    noProgressSteps: z.number().int().min(1).nullable().default(null),
  })
  .strict();

export const studyFileSchema = z
  .object({
    name: nameSchema,
    question: z.string().min(1).max(2000),
    hypothesis: z.string().min(1).max(4000),
    decision: decisionSchema,
    base: baseSchema,
    metric: metricSchema.prefault({ kind: 'final-eval-success' }),
    stages: z.array(stageSchema).min(1).max(20),
    budget: budgetSchema.prefault({}),
    earlyStop: earlyStopSchema.prefault({}),
    /** Times a failed or stalled run is started again before it counts as failed. */
    restarts: z.number().int().min(0).max(10).default(2),
    /** Runs trained at once on this peer (each has its own engine thread). */
    concurrency: z.number().int().min(1).max(64).default(2),
    notes: z.string().max(20_000).optional(),
  })
  .strict();

type StudyFileShape = z.output<typeof studyFileSchema>;
export type StudyTasks = z.output<typeof tasksSchema>;
export type StudyStage = z.output<typeof stageSchema>;
export type StudyArm = Omit<z.output<typeof armSchema>, 'training'> & { training?: TrainingConfigOverrides };
export type StudyMetric = z.output<typeof metricSchema>;
export type StudyDecision = z.output<typeof decisionSchema>;
export type StudySearch = z.output<typeof searchSchema>;

/** A validated study, paths resolved against the file's folder. */
export type Study = Omit<StudyFileShape, 'base' | 'stages'> & {
  base: Omit<StudyFileShape['base'], 'training'> & { training: TrainingConfigOverrides };
  stages: Array<Omit<StudyStage, 'arms'> & { arms?: StudyArm[] }>;
};

/** Reads and validates a study file (YAML or JSON). */
export function readStudyFile(path: string): { study: Study; text: string } {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new StudyFileError(null, (err as NodeJS.ErrnoException).code === 'ENOENT' ? `${file}: no such file` : `${file}: ${(err as Error).message}`);
  }
  return { study: parseStudyText(text, dirname(file), extname(file).toLowerCase() === '.json' ? 'json' : 'yaml'), text };
}

/** Parses a study's text; relative paths are taken from `baseDir`. */
export function parseStudyText(text: string, baseDir: string, format: 'yaml' | 'json' = 'yaml'): Study {
  let value: unknown;
  try {
    value = format === 'json' ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new StudyFileError(null, `not valid ${format === 'json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`);
  }
  return parseStudy(value, baseDir);
}

/** Validates a study object (a parsed file, or a planner's proposal); relative paths are taken from `baseDir`. */
export function parseStudy(value: unknown, baseDir: string): Study {
  const parsed = studyFileSchema.safeParse(value, { reportInput: true });
  if (!parsed.success) {
    // An unknown key explains the missing one next to it (`seedz` for `seeds`): report it first.
    const issues = parsed.error.issues;
    throw issueError(issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0]);
  }
  const data = parsed.data;
  const study: Study = {
    ...data,
    base: {
      ...data.base,
      script: resolvePath(baseDir, data.base.script),
      reward: data.base.reward === undefined ? undefined : resolvePath(baseDir, data.base.reward),
      tasks: resolveTasks(baseDir, data.base.tasks),
      training: trainingAt('base.training', data.base.training),
    },
    stages: data.stages.map((stage, s) => ({
      ...stage,
      arms: stage.arms?.map((arm, a) => ({
        ...arm,
        script: arm.script === undefined ? undefined : resolvePath(baseDir, arm.script),
        reward: arm.reward === undefined ? undefined : resolvePath(baseDir, arm.reward),
        tasks: arm.tasks === undefined ? undefined : resolveTasks(baseDir, arm.tasks),
        training: arm.training === undefined ? undefined : trainingAt(`stages.${s}.arms.${a}.training`, arm.training),
      })),
    })),
  };
  checkCrossReferences(study);
  return study;
}

/** Names that must agree across the file: unique arms, a decision about arms that exist, a budget that fits. */
function checkCrossReferences(study: Study): void {
  study.stages.forEach((stage, s) => {
    const seen = new Set<string>(stage.includeBase ? ['base'] : []);
    stage.arms?.forEach((arm, a) => {
      if (seen.has(arm.name)) throw new StudyFileError(`stages.${s}.arms.${a}.name`, `"${arm.name}" is used twice in stage ${stage.name}; arm names must be unique`);
      seen.add(arm.name);
    });
    if (stage.search?.strategy === 'successive-halving' && stage.search.minSteps > stage.steps) {
      throw new StudyFileError(`stages.${s}.search.minSteps`, `must be at most the stage's steps (${stage.steps}), got ${stage.search.minSteps}`, `at most ${stage.steps}`);
    }
    if (stage.search) {
      for (const knob of Object.keys(stage.search.space)) {
        try {
          parseTrainingOverrides(knobOverrides({ [knob]: exampleValue(stage.search.space[knob]) }));
        } catch (err) {
          if (!(err instanceof TrainingConfigError)) throw err;
          throw new StudyFileError(`stages.${s}.search.space.${knob}`, `not a training setting this space can vary: ${err.message}`, err.allowed);
        }
      }
    }
  });
  if (study.stages.length > 1 && new Set(study.stages.map((s) => s.name)).size !== study.stages.length) {
    throw new StudyFileError('stages', 'stage names must be unique');
  }
  const last = study.stages.at(-1)!;
  const lastArms = last.arms ? [...(last.includeBase ? ['base'] : []), ...last.arms.map((a) => a.name)] : null;
  const referenced = study.decision.kind === 'difference' ? [['better', study.decision.better], ['than', study.decision.than]] : [['arm', study.decision.arm]];
  for (const [key, arm] of referenced) {
    if (arm === 'best' || lastArms === null) continue;
    if (!lastArms.includes(arm)) {
      const guess = closestName(arm, lastArms);
      throw new StudyFileError(`decision.${key}`, `"${arm}" is not an arm of the last stage (${last.name})${guess ? `; did you mean "${guess}"?` : ''}`, `one of ${lastArms.map((a) => `"${a}"`).join(', ')}${study.decision.kind === 'threshold' ? ', "best"' : ''}`);
    }
  }
  if (study.decision.kind === 'difference' && study.decision.better === study.decision.than) {
    throw new StudyFileError('decision.than', 'compares an arm with itself; name two arms');
  }
  const planned = plannedRuns(study);
  if (planned > study.budget.maxRuns) {
    throw new StudyFileError('budget.maxRuns', `the stages plan ${planned} runs, more than the budget's ${study.budget.maxRuns}; raise budget.maxRuns or plan fewer`, `at least ${planned}`);
  }
}

/** Runs a study plans: every stage's arms times its seeds (successive halving continues runs, never adds them). */
export function plannedRuns(study: Pick<Study, 'stages'>): number {
  return study.stages.reduce((n, stage) => n + plannedArms(stage) * seedsOf(stage).length, 0);
}

/** Arms a stage starts (successive halving continues its arms rather than starting new ones). */
function plannedArms(stage: Study['stages'][number]): number {
  const base = stage.includeBase ? 1 : 0;
  if (stage.arms) return base + stage.arms.length;
  const search = stage.search!;
  if (search.strategy === 'grid') {
    return base + Object.values(search.space).reduce((n, d) => n * ('values' in d ? d.values.length : search.pointsPerRange), 1);
  }
  return base + search.trials;
}

/** The seeds of a stage's runs: listed, or 1..n. */
export function seedsOf(stage: Pick<StudyStage, 'seeds'>): number[] {
  return Array.isArray(stage.seeds) ? stage.seeds : Array.from({ length: stage.seeds }, (_, i) => i + 1);
}

/** Knob values (`train.learningRate: 1e-3`) as training overrides (`{ train: { learningRate: 1e-3 } }`). */
export function knobOverrides(params: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [path, value] of Object.entries(params)) {
    const keys = path.split('.');
    let at = out;
    for (const key of keys.slice(0, -1)) at = (at[key] ??= {}) as Record<string, unknown>;
    at[keys.at(-1)!] = value;
  }
  return out;
}

function exampleValue(dimension: z.output<typeof dimensionSchema>): unknown {
  if ('values' in dimension) return dimension.values[0];
  return dimension.integer ? Math.ceil(dimension.min) : dimension.min;
}

function trainingAt(key: string, value: unknown): TrainingConfigOverrides {
  try {
    return parseTrainingOverrides(value ?? {});
  } catch (err) {
    if (!(err instanceof TrainingConfigError)) throw err;
    const reason = err.message.slice(err.message.indexOf(': ') + 2);
    throw new StudyFileError(err.field ? `${key}.${err.field}` : key, reason, err.allowed);
  }
}

function resolvePath(baseDir: string, path: string): string {
  return isAbsolute(path) || path.startsWith('builtin:') ? path : resolve(baseDir, path);
}

function resolveTasks(baseDir: string, tasks: StudyTasks): StudyTasks {
  return 'file' in tasks ? { file: resolvePath(baseDir, tasks.file) } : tasks;
}

type Issue = z.core.$ZodIssue;

/** The keys an object of the study accepts, by where it sits (for "unknown key" errors). */
function knownKeysAt(path: readonly PropertyKey[]): string[] {
  const names = path.filter((p) => typeof p === 'string');
  const last = names.at(-1);
  const shapes: Record<string, z.ZodObject> = { base: baseSchema, budget: budgetSchema, earlyStop: earlyStopSchema, metric: metricSchema };
  if (last === undefined) return Object.keys(studyFileSchema.shape);
  if (last === 'arms') return Object.keys(armSchema.shape);
  if (last === 'stages') return Object.keys(stageSchema.shape);
  return shapes[last] ? Object.keys(shapes[last].shape) : [];
}

/** The first problem of a study in words an author can act on: the key, the value, what is allowed. */
function issueError(issue: Issue): StudyFileError {
  const input = (issue as { input?: unknown }).input;
  // An object is shown by its key, not dumped whole.
  const got = input === undefined || (typeof input === 'object' && input !== null) ? '' : `, got ${JSON.stringify(input)}`;
  const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
  const key = [...issue.path, ...keys.slice(0, 1)].map(String).join('.') || null;
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = knownKeysAt(issue.path);
      const guess = closestName(issue.keys[0], known);
      const allowed = known.join(', ');
      return new StudyFileError(key, `unknown key${guess ? ` (did you mean ${guess}?)` : ''}; allowed: ${allowed}`, allowed);
    }
    case 'too_small': {
      const allowed = `${issue.inclusive === false ? 'greater than' : 'at least'} ${String(issue.minimum)}`;
      return new StudyFileError(key, `must be ${allowed}${got}`, allowed);
    }
    case 'too_big': {
      const allowed = `${issue.inclusive === false ? 'less than' : 'at most'} ${String(issue.maximum)}`;
      return new StudyFileError(key, `must be ${allowed}${got}`, allowed);
    }
    case 'invalid_value': {
      const allowed = `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
      return new StudyFileError(key, `must be ${allowed}${got}`, allowed);
    }
    case 'invalid_union': {
      const options = (issue as { options?: unknown[] }).options;
      if (options) {
        const allowed = `one of ${options.map((o) => JSON.stringify(o)).join(', ')}`;
        const value = (input as Record<string, unknown> | undefined)?.[String(issue.path.at(-1))];
        return new StudyFileError(key, `must be ${allowed}${value === undefined ? '' : `, got ${JSON.stringify(value)}`}`, allowed);
      }
      return new StudyFileError(key, input === undefined ? 'is required' : `${issue.message}${got}`);
    }
    case 'invalid_type': {
      const allowed = issue.expected === 'int' ? 'an integer' : `a ${issue.expected}`;
      return new StudyFileError(key, input === undefined ? `is required (${allowed})` : `must be ${allowed}${got}`, allowed);
    }
    default:
      return new StudyFileError(key, `${issue.message}${got}`);
  }
}
