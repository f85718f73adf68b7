/**
 * The client runner's boundary types: what `POST /api/clients` takes (attach a script with its tasks), what
 * `GET /api/clients` answers, and the result line an agent script prints. Pure types and zod schemas.
 */
import { z } from 'zod';
import { SCRIPT_FILENAME_PATTERN } from './script-extensions.ts';
import { episodeAliasesSchema, episodeSamplingSchema } from './swarm-api.ts';

/** How a script is run; `auto` picks by file extension (script-extensions.ts: .py → python, JS/TS → node). */
export const scriptRuntimeSchema = z.enum(['auto', 'node', 'python']);
export type ScriptRuntime = z.infer<typeof scriptRuntimeSchema>;

const nameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'use 1–64 letters, digits, dot, dash or underscore, starting with a letter or digit');

/** A role name becomes part of env var names (`OPENAI_API_KEY_PROPOSER`), so it is a plain identifier. */
const roleNameSchema = z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,31}$/, 'roles are identifiers: letters, digits, underscore');

/** One task: an object with a string or number id; everything else is the task's own data. */
export const taskSchema = z.looseObject({ id: z.union([z.string().min(1), z.number()]) });
export type Task = z.infer<typeof taskSchema> & Record<string, unknown>;

/** A script's resource limits (see `attachClientSchema.limits`). */
export const scriptLimitsSchema = z.object({
  /** Memory in MiB each process may map private and writable (heap, buffers, objects: RLIMIT_DATA). */
  memoryMb: z.number().int().min(256).max(1_048_576).optional(),
  /** CPU seconds per process (RLIMIT_CPU), all its threads together. */
  cpuS: z.number().int().min(1).max(864_000).optional(),
  /** Processes and threads (RLIMIT_NPROC), counted per sandbox under bubblewrap. */
  processes: z.number().int().min(8).max(65_536).optional(),
  /** Largest file the script may write (RLIMIT_FSIZE), in MiB. */
  fileSizeMb: z.number().int().min(1).max(1_048_576).optional(),
});
export type ScriptLimits = z.infer<typeof scriptLimitsSchema>;

/**
 * How the runner isolates scripts, for the status: `bubblewrap` (namespaces: the script sees its work dir, its
 * snapshot read-only and the system read-only, nothing of the peer) or `none` (it runs as the peer's user with
 * in-process guards only). `detail` says what that means on this machine in a sentence or two.
 */
export interface RunnerIsolation {
  kind: 'bubblewrap' | 'none';
  detail: string;
}

export const attachClientSchema = z
  .object({
    name: nameSchema,
    /** A script file on the peer's machine, or its content uploaded with a file name (the name picks the runtime). */
    script: z.union([
      z.object({ path: z.string().min(1) }),
      z.object({ content: z.string().min(1).max(2_000_000), filename: z.string().regex(SCRIPT_FILENAME_PATTERN) }),
    ]),
    runtime: scriptRuntimeSchema.default('auto'),
    /** A JSONL file, a generator module (.js/.ts exporting a function or iterable of tasks), or the tasks inline. */
    tasks: z.union([z.object({ path: z.string().min(1) }), z.object({ inline: z.array(taskSchema).min(1) })]),
    /** A module whose default export computes the reward when the agent does not (`(task, output) => number`). */
    rewardModule: z.string().min(1).optional(),
    /** One model for the whole script, or a team: role → model (proposer + verifier). */
    model: z.string().min(1).optional(),
    models: z.record(roleNameSchema, z.string().min(1)).optional(),
    /** Model names the script hard-codes (e.g. "gpt-4o-mini") that the gateway maps to the trained model. */
    aliases: episodeAliasesSchema.default([]),
    /** GRPO group size: each train task runs this many times. */
    repeat: z.number().int().min(1).max(1024).default(1),
    concurrency: z.number().int().min(1).max(1024).default(4),
    /** Share of episodes among attached scripts (weighted fair scheduling). */
    weight: z.number().positive().max(1000).default(1),
    /** Passes over the task source; omitted = keep going until detached. */
    epochs: z.number().int().min(1).optional(),
    timeLimitS: z.number().positive().max(86_400).default(600),
    /** The script is killed when it prints nothing for this long (0 = never). */
    outputIdleS: z.number().min(0).max(86_400).default(0),
    /** Sent to the episode API: no LLM call for this long aborts the episode there. */
    idleTimeoutS: z.number().positive().max(86_400).optional(),
    /** Re-runs of a task whose episode failed, with exponential backoff. */
    retries: z.number().int().min(0).max(10).default(1),
    /** Consecutive failures that pause the script (circuit breaker). */
    maxConsecutiveFailures: z.number().int().min(1).max(1000).default(5),
    /** Re-attaching under the same name: let in-flight episodes of the old version finish, or abort them. */
    inFlight: z.enum(['finish', 'abort']).default('finish'),
    /**
     * Re-attaching under the same name a script from another folder (or, uploaded, with another file name) is
     * refused unless this is true: every example is `agent.*`, so a name clash is more often a mistake than a swap.
     */
    swap: z.boolean().default(false),
    /** Run one episode of the first train task and answer with its run and calls; nothing stays attached. */
    dryRun: z.boolean().default(false),
    /**
     * Node scripts: bundle the script with the packages it imports into one module at attach, so that each episode's
     * process loads one file (about half the start-up CPU of an agent on the `openai` client). Off by default: a
     * bundle breaks packages that read files beside their code (wasm, data) or load native addons.
     */
    bundle: z.boolean().default(false),
    /**
     * Scripts run sandboxed: under bubblewrap where the runner has it (`ClientRunner.isolation()` says), else with
     * in-process guards (Node's permission model, an audit hook for Python) that are no boundary. false = as is.
     */
    sandbox: z.boolean().default(true),
    /** Sampling for eval episodes (train episodes sample the policy as it is). */
    sampling: episodeSamplingSchema.optional(),
    /**
     * Resource limits of each run's processes (rlimits, per process), where the OS has them; unset fields take
     * the runner's defaults. Applied only with `sandbox: true`.
     */
    limits: scriptLimitsSchema.optional(),
    /**
     * `on` (default): the script reaches the network as the peer does (agents call tools on the internet).
     * `none`: no network at all, not even the peer's gateway — for offline scripts; it needs bubblewrap (an attach
     * asking for it where the runner cannot cut the network is refused, never silently ignored).
     */
    network: z.enum(['on', 'none']).optional(),
  })
  .refine((v) => (v.model === undefined) !== (v.models === undefined), {
    message: 'give either model (one model) or models (role → model for a team), not both and not neither',
    path: ['model'],
  })
  .refine((v) => v.models === undefined || Object.keys(v.models).length >= 2, {
    message: 'a team needs at least two roles',
    path: ['models'],
  });
export type AttachClientRequest = z.input<typeof attachClientSchema>;
export type AttachClientOptions = z.output<typeof attachClientSchema>;

export type ClientState = 'running' | 'paused' | 'broken' | 'finished';

/** The role of a single-model script's one episode (`ClientStatus.models` is `{ default: model }` then). */
export const SINGLE_MODEL_ROLE = 'default';

/**
 * Why a run was aborted, as a code (the prose beside it in `reason` says the details). The script's own failures
 * (retried, counted by the circuit breaker) and the others (the runner or the episode API ended the run).
 */
export const runAbortCodeSchema = z.enum([
  /** The episode API refused to start an episode for good (unknown model, bad request; not "busy"). */
  'begin_failed',
  /** The script's process could not be started. */
  'spawn_failed',
  /** It exited with a non-zero code. */
  'script_failed',
  /** It was killed by a signal it did not get from the runner. */
  'script_crashed',
  'time_limit',
  'output_idle',
  /** It exited 0 without a usable result line. */
  'no_result',
  /** The reward module threw or answered something that is not a reward. */
  'reward_module_failed',
  /** A team's result has no reward for one of its roles. */
  'role_reward_missing',
  /** The episode API refused the result (e.g. the episode had timed out there). */
  'end_refused',
  /** Not the script's fault: a newer version replaced it (inFlight: abort), it was detached, or the runner stopped. */
  'replaced',
  'detached',
  'runner_stopped',
  /**
   * Not the script's fault either: its episode's server went away during the run (a swarm peer that stopped or
   * dropped), so the script's calls failed; not counted by the circuit breaker.
   */
  'server_gone',
]);
export type RunAbortCode = z.infer<typeof runAbortCodeSchema>;

/** An abort: the code to act on, the reason to read. */
export interface RunAbort {
  code: RunAbortCode;
  reason: string;
}

export interface TaskMetrics {
  episodes: number;
  aborted: number;
  rewardSum: number;
  meanReward: number | null;
}

export interface ClientStatus {
  name: string;
  state: ClientState;
  /** Why a client is paused or broken (the circuit breaker's reason, or "paused by user"). */
  reason: string | null;
  version: number;
  scriptHash: string;
  scriptFile: string;
  runtime: 'node' | 'python';
  models: Record<string, string>;
  weight: number;
  concurrency: number;
  repeat: number;
  inFlight: number;
  counts: { started: number; ended: number; aborted: number; retried: number; consecutiveFailures: number };
  meanReward: number | null;
  perTask: Record<string, TaskMetrics>;
}

export interface ClientRunRecord {
  episodeIds: string[];
  client: string;
  scriptHash: string;
  taskId: string;
  kind: 'train' | 'eval';
  status: 'running' | 'ended' | 'aborted';
  reason: string | null;
  /** Why an aborted run was aborted, as a code (null when it ended, and for runs recorded before codes existed). */
  code?: RunAbortCode | null;
  reward: number | null;
  exitCode: number | null;
  /** How long the script's process ran (spawn to exit); the rest of the episode's time is the runner's. */
  processMs: number | null;
  stdout: string;
  stderr: string;
  startedAt: string;
  endedAt: string | null;
}

/** One call of a dry run's episode: what the agent sent and what the model answered. */
export interface DryRunCall {
  messages: unknown[];
  assistantMessage: unknown;
  finishReason: string | null;
}

/** What `POST /api/clients` answers for `dryRun: true`. */
export interface DryRunResult {
  dryRun: true;
  run: ClientRunRecord;
  /** The episode's calls, from this peer's store (empty when the episode ran on another peer of the swarm). */
  calls: DryRunCall[];
}

/** The line an agent script prints last (or that the reward module returns). */
export const scriptResultSchema = z.union([
  z.object({ reward: z.number().finite(), success: z.boolean().optional(), metrics: z.record(z.string(), z.number()).optional() }),
  z.object({
    rewards: z.record(z.string(), z.number().finite()),
    success: z.boolean().optional(),
    metrics: z.record(z.string(), z.number()).optional(),
  }),
]);
export type ScriptResult = z.infer<typeof scriptResultSchema>;

/** Events the runner pushes over the control WebSocket. */
export type RunnerEvent =
  | { type: 'client'; data: ClientStatus }
  | { type: 'client-paused'; data: { name: string; reason: string; breaker: boolean } }
  /** Detached (from the UI, the CLI or the API): no longer listed. */
  | { type: 'client-detached'; data: { name: string } };
