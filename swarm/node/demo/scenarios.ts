/**
 * The demo's scenarios: what is hosted, which agents play which tasks, and how the train episodes are shared.
 * Each scenario is a claim of the paper made visible on this machine:
 *
 *   calculator  one agent with a tool (the default demo)
 *   multi-turn  an environment that answers every move (guess the number, a Python agent)
 *   cocktail    the calculator (a TypeScript agent) and guess the number (a Python agent) trained together on one
 *               model, each in its own runtime, shared by weight
 *   team        two hosted models as one team's brains: a proposer answers, a verifier accepts or rejects, each
 *               model trained on its own role's reward
 *
 * A user's own script (`--script`) is a one-task plan of the same shape.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultModelName, parseModelSource } from '../models/model-spec.ts';
import { splitUserTasks, writeCalculatorTasks, writeGuessTasks, type TaskFiles } from './task-files.ts';

export class ScenarioError extends Error {
  override name = 'ScenarioError';
}

const repoFile = (path: string) => fileURLToPath(new URL(`../../../${path}`, import.meta.url));

export const SCENARIO_NAMES = ['calculator', 'multi-turn', 'cocktail', 'team'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/** Who plays a task: one model, or a team (role → model). */
export type TaskPlayers = { model: string } | { team: Record<string, string> };

export interface DemoTask {
  /** Its name in the report and on the console ("calculator", "guess", or the user's script's file name). */
  name: string;
  script: string;
  reward?: string;
  /**
   * Bundle the (Node) script with its packages at attach, for a faster start of each episode: the project's own agents
   * are known to bundle; a user's script runs as it is.
   */
  bundle?: boolean;
  /** Its share of the train episodes, against the plan's other tasks (cocktail weights). */
  weight: number;
  players: TaskPlayers;
  /** Writes its train and held-out task files under `dir` (a folder of its own). */
  files(dir: string): Promise<TaskFiles>;
}

export interface DemoPlan {
  /** Hosted and trained, by name: `builtin:NAME` or a Hugging Face folder. */
  models: Array<{ name: string; source: string }>;
  tasks: DemoTask[];
}

export interface PlanCounts {
  evalTasks: number;
  trainTasks: number;
  seed: number;
}

export const DEFAULT_SCRIPTS = {
  calculator: { script: repoFile('examples/calculator/agent.ts'), reward: repoFile('examples/calculator/reward.ts') },
  guess: { script: repoFile('examples/guess-the-number/agent.py') },
  team: { script: repoFile('examples/proposer-verifier/agent.ts') },
} as const;

/** The model each scenario starts from (its warm start is shipped: swarm/node/demo/pretrain.ts). */
export const SCENARIO_MODELS: Record<ScenarioName, string> = {
  calculator: 'builtin:tiny',
  'multi-turn': 'builtin:tiny-guess',
  cocktail: 'builtin:tiny-guess',
  team: 'builtin:tiny-team',
};

/** The team's roles, each a hosted model of its own name, and the warm start each starts from. */
export const TEAM_ROLE_MODELS: Record<'proposer' | 'verifier', string> = {
  proposer: SCENARIO_MODELS.team,
  verifier: 'builtin:tiny-verifier',
};

/** The warm starts a scenario hosts (a team's: one per role). */
export function scenarioModelSources(name: ScenarioName): string[] {
  return name === 'team' ? Object.values(TEAM_ROLE_MODELS) : [SCENARIO_MODELS[name]];
}

/** Training settings a scenario is run with unless told otherwise (`agentjet demo` flags override them). */
export interface ScenarioSettings {
  steps: number;
  batchTasks: number;
  groupSize: number;
  learningRate: number;
  klCoef: number;
}

const SCENARIO_SETTINGS: Record<ScenarioName, Partial<ScenarioSettings>> = {
  calculator: {},
  // A search is learnt from more episodes than one tool decision: 48 a step (1e-3 on 32 diverged here); 5e-4 with KL
  // 0.01 keeps the KL to the start at 0.1–0.4 (7e-4 with KL 0.001 let it pass 1 by step 40). Since the environment
  // lists the numbers still possible, 60 steps went 50% → 84% (10 min 8 s), 50 steps 49% → 83% (8 min 3 s) and 45
  // steps 60% → 87% (8 min 36 s): the later steps discard most groups (every repeat finds the secret), so they take
  // more episodes each.
  'multi-turn': { steps: 50, batchTasks: 6, groupSize: 8, learningRate: 5e-4, klCoef: 0.01 },
  // At 7e-4 (KL 0.001) the calculator collapsed late (KL near 1); 5e-4 with KL 0.01 held it longer and ended higher.
  cocktail: { steps: 40, batchTasks: 6, groupSize: 8, learningRate: 5e-4, klCoef: 0.01 },
  // The verifier judges planted answers in training, right and wrong half and half (examples/proposer-verifier). At
  // the default 5e-4 with KL 0.001 it learnt to follow its check but lost some of its copying (miscopied checks
  // 5% → 18% of right answers, its balanced accuracy 0.85 → 0.82); KL 0.01 held the copying a little better
  // (0.83 → 0.86), and 3e-4 with KL 0.01 kept it (0.83 → 0.94 quiet; 0.82–0.84 → 0.94–0.96 in three runs under load).
  team: { steps: 40, batchTasks: 4, groupSize: 4, learningRate: 3e-4, klCoef: 0.01 },
};

export function scenarioDefaults(name: ScenarioName): Partial<ScenarioSettings> {
  return SCENARIO_SETTINGS[name];
}

function calculatorTask(model: string, counts: PlanCounts, weight = 1): DemoTask {
  return { name: 'calculator', ...DEFAULT_SCRIPTS.calculator, bundle: true, weight, players: { model }, files: async (dir) => writeCalculatorTasks(dir, counts) };
}

function guessTask(model: string, counts: PlanCounts, weight = 1): DemoTask {
  return { name: 'guess', ...DEFAULT_SCRIPTS.guess, weight, players: { model }, files: async (dir) => writeGuessTasks(dir, counts) };
}

/** The hosted name of a model source: the source's own (`tiny-guess`, a folder's name). */
function hosted(source: string): { name: string; source: string } {
  return { name: defaultModelName(parseModelSource(source)), source };
}

/** The plan of a scenario; `modelSource` replaces the scenario's own model (both of a team's roles start from it). */
export function scenarioPlan(name: ScenarioName, counts: PlanCounts, modelSource?: string): DemoPlan {
  if (name === 'team') {
    // Two hosted models, one per role, each from its role's warm start: each learns only from its own role's episodes.
    const team = { proposer: 'proposer', verifier: 'verifier' };
    return {
      models: (['proposer', 'verifier'] as const).map((role) => ({ name: team[role], source: modelSource ?? TEAM_ROLE_MODELS[role] })),
      tasks: [{ name: 'team', ...DEFAULT_SCRIPTS.team, bundle: true, weight: 1, players: { team }, files: async (dir) => writeCalculatorTasks(dir, counts) }],
    };
  }
  const model = hosted(modelSource ?? SCENARIO_MODELS[name]);
  if (name === 'cocktail') {
    // The game takes more episodes to learn than the tool decision: it gets two thirds of them.
    return { models: [model], tasks: [calculatorTask(model.name, counts, 1), guessTask(model.name, counts, 2)] };
  }
  return { models: [model], tasks: [(name === 'calculator' ? calculatorTask : guessTask)(model.name, counts)] };
}

/** A user's agent script with its task file (held-out tasks carry "split": "eval") and optional grader. */
export function scriptPlan(options: { script: string; tasks: string; reward?: string; model: string; bundle: boolean }): DemoPlan {
  const name = options.script.split('/').pop()!.replace(/\.[^.]+$/, '');
  const model = hosted(options.model);
  return {
    models: [model],
    tasks: [{ name, script: options.script, bundle: options.bundle, ...(options.reward ? { reward: options.reward } : {}), weight: 1, players: { model: model.name }, files: (dir) => splitUserTasks(dir, options.tasks) }],
  };
}

export function parseScenario(text: string): ScenarioName {
  if ((SCENARIO_NAMES as readonly string[]).includes(text)) return text as ScenarioName;
  throw new ScenarioError(`unknown scenario "${text}"; the scenarios are ${SCENARIO_NAMES.join(', ')} (or all)`);
}

/** The folder of one task's files inside the run folder. */
export function taskDir(outDir: string, task: Pick<DemoTask, 'name'>): string {
  return join(outDir, 'tasks', task.name);
}
