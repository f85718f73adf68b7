/**
 * Which sampling parameters a call runs with.
 *
 * Train episodes sample the policy as it is (temperature 1, top_p 1, unless the episode was started with other
 * `sampling`): the logprobs recorded at sampling are then the policy's own, which PPO's ratio needs. The request's
 * temperature / top_p are ignored there. Eval episodes use the client's parameters: the episode's `sampling`, else
 * the request's. Both honour the request's max tokens, stop strings, seed and logprobs.
 */
import type { SamplingParams } from '../../../worker/common/engine.ts';
import type { EpisodeSampling } from '../../common/swarm-api.ts';

/** Default answer length when neither the request nor the episode sets one: a long tool-using turn. */
export const DEFAULT_MAX_TOKENS = 1024;

/**
 * A positive temperature whose reciprocal overflows (a denormal, under ~5.6e-309, which the schemas accept) is
 * greedy in effect, and the engine's 1 / temperature would be Infinity: every scaled logit NaN, the sampled token
 * id undefined. Such a temperature is sent as 0, the engine's greedy pick.
 */
function usableTemperature(temperature: number): number {
  return Number.isFinite(1 / temperature) ? temperature : 0;
}

export interface SamplingContext {
  kind: 'train' | 'eval';
  episode: EpisodeSampling;
  stopTokenIds: number[];
  /** Context window left after the prompt. */
  roomLeft: number;
}

/** What a request asks of sampling, whichever API it came through (null and undefined: not asked). */
export interface ClientSampling {
  temperature?: number | null;
  topP?: number | null;
  topK?: number | null;
  maxTokens?: number | null;
  seed?: number | null;
  /** Alternatives reported per token; 0 when logprobs are not asked for. */
  topLogprobs?: number;
  stopStrings: string[];
}

/** The sampling of a request of any gateway API. */
export function clientSamplingFor(req: ClientSampling, ctx: SamplingContext, sampleIndex: number): SamplingParams {
  const fromClient = ctx.kind === 'eval';
  const askedTemperature = ctx.episode.temperature ?? (fromClient ? req.temperature : undefined) ?? 1;
  const temperature = usableTemperature(askedTemperature);
  const topP = ctx.episode.top_p ?? (fromClient ? req.topP : undefined) ?? 1;
  const topK = ctx.episode.top_k ?? (fromClient ? req.topK : undefined) ?? 0;
  const asked = req.maxTokens ?? ctx.episode.max_tokens ?? DEFAULT_MAX_TOKENS;
  const seed = req.seed ?? ctx.episode.seed;
  const params: SamplingParams = {
    // A request asking for more than the room left gets the room left (Anthropic's clients ask for 32k).
    maxTokens: Math.min(asked, ctx.roomLeft),
    temperature,
    topP,
    topK,
    stopTokenIds: ctx.stopTokenIds,
    stopStrings: req.stopStrings,
    topLogprobs: req.topLogprobs ?? 0,
  };
  // The n samples of one request must differ, yet the request stays reproducible.
  if (seed !== undefined && seed !== null) params.seed = seed + sampleIndex;
  return params;
}
