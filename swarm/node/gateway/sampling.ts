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
import type { ChatCompletionRequest } from './chat-request.ts';
import { stopStrings } from './chat-request.ts';

/** Default answer length when neither the request nor the episode sets one: a long tool-using turn. */
export const DEFAULT_MAX_TOKENS = 1024;

export interface SamplingContext {
  kind: 'train' | 'eval';
  episode: EpisodeSampling;
  stopTokenIds: number[];
  /** Context window left after the prompt. */
  roomLeft: number;
}

export function samplingFor(req: ChatCompletionRequest, ctx: SamplingContext, sampleIndex: number): SamplingParams {
  const fromClient = ctx.kind === 'eval';
  const temperature = ctx.episode.temperature ?? (fromClient ? req.temperature : undefined) ?? 1;
  const topP = ctx.episode.top_p ?? (fromClient ? req.top_p : undefined) ?? 1;
  const asked = req.max_completion_tokens ?? req.max_tokens ?? ctx.episode.max_tokens ?? DEFAULT_MAX_TOKENS;
  const seed = req.seed ?? ctx.episode.seed;
  const params: SamplingParams = {
    maxTokens: Math.min(asked, ctx.roomLeft),
    temperature,
    topP,
    topK: ctx.episode.top_k ?? 0,
    stopTokenIds: ctx.stopTokenIds,
    stopStrings: stopStrings(req),
    topLogprobs: req.logprobs ? (req.top_logprobs ?? 0) : 0,
  };
  // The n samples of one request must differ, yet the request stays reproducible.
  if (seed !== undefined && seed !== null) params.seed = seed + sampleIndex;
  return params;
}
