/**
 * Payloads of the swarm protocol (/swarm/v1): starting, ending and aborting episodes, and the server's status.
 * Shared by the peer (validation at the edge), runners, SDKs and tests. Pure: zod schemas and types only.
 */
import { z } from 'zod';

/** Sampling an eval episode asks for; train episodes sample the policy as it is (temperature 1, top_p 1). */
export const episodeSamplingSchema = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    max_tokens: z.number().int().positive().optional(),
    seed: z.number().int().optional(),
  })
  .strict();
export type EpisodeSampling = z.infer<typeof episodeSamplingSchema>;

/** Idle timeout bounds: long enough for slow tools, short enough that a dead client frees its pool slot. */
export const DEFAULT_IDLE_TIMEOUT_S = 300;
export const MAX_IDLE_TIMEOUT_S = 24 * 3600;

const label = z.string().min(1).max(200);

/** Extra names an agent may send as `model` in one episode: few and short, so they fit in errors and logs. */
export const episodeAliasesSchema = z.array(z.string().min(1).max(100)).max(16);

export const createEpisodeRequestSchema = z
  .object({
    model: z.string().min(1),
    /** The GRPO group: repeats of one task are compared with each other. */
    taskId: label,
    kind: z.enum(['train', 'eval']).default('train'),
    /** No LLM call for this long ⇒ the episode is aborted (never trained on). */
    idleTimeoutS: z.number().positive().max(MAX_IDLE_TIMEOUT_S).optional(),
    sampling: episodeSamplingSchema.optional(),
    client: label.optional(),
    scriptHash: label.optional(),
    teamId: label.optional(),
    /** Extra names the agent may use for the model in this episode (e.g. a hard-coded "gpt-4o-mini"). */
    aliases: episodeAliasesSchema.optional(),
  })
  .strict();
export type CreateEpisodeRequest = z.input<typeof createEpisodeRequestSchema>;

export interface CreateEpisodeResponse {
  episodeId: string;
  /** OpenAI-compatible base URL for the agent (`…/v1`). */
  baseUrl: string;
  /** The agent's API key: valid for this episode only, until it ends. */
  apiKey: string;
  /** The model's canonical name (the request may have used an alias). */
  model: string;
  policyVersion: number;
  /** The model's training step now (absent from peers before it was sent). */
  step?: number;
  /**
   * Run held-out tasks on the weights of every Nth step (the model's training setting `evalEvery`; 0 or absent:
   * once per pass over the tasks). Runners anywhere in the swarm follow the server's setting.
   */
  evalEvery?: number;
}

export const endEpisodeRequestSchema = z
  .object({
    reward: z.number().finite(),
    success: z.boolean().optional(),
    metrics: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type EndEpisodeRequest = z.infer<typeof endEpisodeRequestSchema>;

export const abortEpisodeRequestSchema = z.object({ reason: z.string().min(1).max(2000) }).strict();
export type AbortEpisodeRequest = z.infer<typeof abortEpisodeRequestSchema>;

export interface EndEpisodeResponse {
  episodeId: string;
  state: 'ended' | 'aborted';
  calls: number;
  timelines: number;
}

export interface SwarmStatusResponse {
  nodeId: string;
  models: (ModelStatus & { aliases: string[] })[];
  episodes: { active: number };
}

/** One hosted model as the status reports it. */
export interface ModelStatus {
  name: string;
  source: string;
  engineState: 'loading' | 'idle' | 'rolling' | 'draining' | 'updating' | 'failed';
  policyVersion: number;
  step: number;
  backend: string | null;
  /** Which engine serves the calls: the trainer's own ('shared') or a second one that samples while it trains. */
  sampler?: 'shared' | 'separate';
  pool: { active: number; limit: number };
  error?: string;
}
