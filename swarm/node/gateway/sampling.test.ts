/**
 * Found by the chaos fuzz (seed 7, swarm/node/testing/fuzz/): a denormal temperature such as 4.4e-323 passes the
 * request schema (≥ 0), but 1 / temperature is Infinity in the sampler, so every logit turned NaN and the token id
 * undefined; the stop-string scan then killed the engine thread and every later call answered 500.
 */
import { describe, expect, it } from 'vitest';
import { chatSampling, type ChatCompletionRequest } from './chat-request.ts';
import { clientSamplingFor, type SamplingContext } from './sampling.ts';

/** A chat-completions request's sampling, as the gateway computes it. */
const samplingFor = (req: ChatCompletionRequest, ctx: SamplingContext, sampleIndex: number) => clientSamplingFor(chatSampling(req), ctx, sampleIndex);

const request = (temperature: number): ChatCompletionRequest => ({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], temperature });
const evalContext: SamplingContext = { kind: 'eval', episode: {}, stopTokenIds: [], roomLeft: 100 };

describe('samplingFor temperatures', () => {
  it('sends a temperature whose reciprocal overflows as 0 (greedy)', () => {
    expect(samplingFor(request(4.4e-323), evalContext, 0).temperature).toBe(0);
    expect(samplingFor(request(Number.MIN_VALUE), evalContext, 0).temperature).toBe(0);
    expect(samplingFor(request(0), { ...evalContext, episode: { temperature: 5e-324 } }, 0).temperature).toBe(0);
  });

  it('keeps every temperature the sampler can divide by', () => {
    for (const t of [0, 1e-300, 1e-6, 0.7, 1, 2]) expect(samplingFor(request(t), evalContext, 0).temperature).toBe(t);
    expect(samplingFor(request(0.3), { ...evalContext, kind: 'train' }, 0).temperature).toBe(1);
  });
});
