/**
 * Anthropic's Messages API driven by other clients, unchanged but for base URL and key: the Vercel AI SDK's Anthropic
 * provider (its base URL is `<origin>/v1`; it appends `/messages`) and LangChain's ChatAnthropic (`anthropicApiUrl` is
 * the origin, as with Anthropic's SDK, which it wraps). A real peer with builtin:tiny; assertions are on what was
 * recorded and on shapes, not on what the random tiny model says.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { ChatAnthropic } from '@langchain/anthropic';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { getCalls } from '../store/episode-reads.ts';
import { startTestPeer, type TestPeer } from './testing/peer.ts';

let peer: TestPeer;
beforeAll(async () => {
  peer = await startTestPeer();
});
afterAll(async () => peer?.stop());

const calls = (episode: CreateEpisodeResponse) => getCalls(peer.runtime.db, episode.episodeId);

const CALC_SCHEMA = { type: 'object' as const, properties: { expr: { type: 'string' as const } }, required: ['expr'] };

describe('Vercel AI SDK, Anthropic provider', () => {
  const providerFor = (episode: CreateEpisodeResponse) => createAnthropic({ baseURL: `${peer.origin}/v1`, apiKey: episode.apiKey });

  it('generates and streams text, each a recorded call with usage equal to what was recorded', async () => {
    const episode = await peer.startEpisode();
    const model = providerFor(episode)('claude-sonnet-4-5');
    const result = await generateText({ model, system: 'be brief', prompt: 'hello', maxOutputTokens: 6, maxRetries: 0 });
    const [first] = calls(episode);
    expect(first.messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hello' },
    ]);
    expect(result.usage.inputTokens).toBe(first.promptIds.length);
    expect(result.usage.outputTokens).toBe(first.generatedIds.length);
    expect(result.text).toBe(first.assistantMessage?.content ?? '');
    expect(['stop', 'length']).toContain(result.finishReason);

    const streamed = streamText({ model, prompt: 'count', maxOutputTokens: 6, maxRetries: 0 });
    let deltas = 0;
    let text = '';
    for await (const part of streamed.textStream) {
      deltas += 1;
      text += part;
    }
    const usage = await streamed.usage;
    const second = calls(episode)[1];
    expect(text).toBe(second.assistantMessage?.content ?? '');
    if (text !== '') expect(deltas).toBeGreaterThan(0);
    expect(usage.inputTokens).toBe(second.promptIds.length);
    expect(usage.outputTokens).toBe(second.generatedIds.length);
    expect(calls(episode)).toHaveLength(2);
  });

  it('forces a named tool and runs the tool_use → tool_result round trip', async () => {
    // Greedy through the episode's sampling: builtin:tiny is warm-started on the calculator agent's conversations.
    const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
    const model = providerFor(episode)('tiny');
    const seen: unknown[] = [];
    const calc = tool({
      description: 'Evaluate arithmetic',
      inputSchema: jsonSchema<{ expr: string }>(CALC_SCHEMA),
      execute: (input) => {
        seen.push(input);
        return Promise.resolve('408');
      },
    });
    const first = await generateText({
      model,
      system: 'Use calc.',
      prompt: 'What is 12*34?',
      tools: { calc },
      toolChoice: { type: 'tool', toolName: 'calc' },
      maxOutputTokens: 32,
      maxRetries: 0,
    });
    const [call] = calls(episode);
    expect(call.tools?.map((t) => t.function.name)).toEqual(['calc']);
    expect(call.tools?.[0].function.parameters).toMatchObject(CALC_SCHEMA);
    expect(call.messages.at(-1)).toMatchObject({ role: 'user', content: 'What is 12*34?' });
    expect(call.assistantMessage?.tool_calls?.map((c) => c.function.name)).toEqual(['calc']);
    expect(first.toolCalls.map((c) => c.toolName)).toEqual(['calc']);
    expect(first.finishReason).toBe('tool-calls');
    expect(seen).toHaveLength(1);
    const toolCallId = first.toolCalls[0].toolCallId;
    expect(toolCallId).toBe(call.assistantMessage?.tool_calls?.[0].id);

    // Second step: the SDK sends the tool_use back with its tool_result; the gateway splices the generated turn.
    await generateText({
      model,
      system: 'Use calc.',
      messages: [{ role: 'user', content: 'What is 12*34?' }, ...first.response.messages],
      tools: { calc },
      maxOutputTokens: 6,
      maxRetries: 0,
    });
    const second = calls(episode)[1];
    expect(second.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: toolCallId, content: '408' });
    expect(second.splice.turns[0]).toMatchObject({ callId: call.callId, outcome: 'spliced' });
  });

  it('runs a multi-step agent loop with stopWhen in one generateText', async () => {
    const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
    const result = await generateText({
      model: providerFor(episode)('tiny'),
      system: 'Use calc.',
      prompt: 'What is 12*34?',
      tools: { calc: tool({ description: 'Evaluate arithmetic', inputSchema: jsonSchema<{ expr: string }>(CALC_SCHEMA), execute: () => Promise.resolve('408') }) },
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: { type: 'tool', toolName: 'calc' } } : { toolChoice: 'none' }),
      stopWhen: stepCountIs(2),
      maxOutputTokens: 32,
      maxRetries: 0,
    });
    expect(result.steps).toHaveLength(2);
    const recorded = calls(episode);
    expect(recorded).toHaveLength(2);
    // toolChoice 'none': the provider sends no tools at all, and the gateway accepts tool_use / tool_result turns without them.
    expect(recorded[1].tools).toBeNull();
    expect(recorded[1].messages.at(-1)).toMatchObject({ role: 'tool', content: '408' });
  });
});

describe("LangChain's ChatAnthropic", () => {
  const chatFor = (episode: CreateEpisodeResponse, maxTokens: number) =>
    new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey: episode.apiKey, anthropicApiUrl: peer.origin, maxTokens, maxRetries: 0 });

  it('invokes and streams; the streamed text is the recorded message, as generated', async () => {
    const episode = await peer.startEpisode();
    const chat = chatFor(episode, 6);
    const answer = await chat.invoke('hello');
    const [first] = calls(episode);
    expect(first.messages).toEqual([{ role: 'user', content: 'hello' }]);
    const answerText = typeof answer.content === 'string' ? answer.content : answer.content.flatMap((b) => (b.type === 'text' ? [b.text as string] : [])).join('');
    expect(answerText).toBe(first.assistantMessage?.content ?? '');
    expect(answer.usage_metadata?.input_tokens).toBe(first.promptIds.length);
    expect(answer.usage_metadata?.output_tokens).toBe(first.generatedIds.length);

    let streamed = '';
    for await (const chunk of await chat.stream('count')) {
      if (typeof chunk.content === 'string') streamed += chunk.content;
      else for (const block of chunk.content) if (block.type === 'text' || block.type === 'text_delta') streamed += String(block.text);
    }
    const second = calls(episode)[1];
    expect(streamed).toBe(second.assistantMessage?.content ?? '');
    expect(calls(episode)).toHaveLength(2);
  });

  it('sends bound tools, and a forced tool choice reaches the prompt as a call of that tool', async () => {
    const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
    const calc = { name: 'calc', description: 'Evaluate arithmetic', input_schema: CALC_SCHEMA };
    const answer = await chatFor(episode, 32).bindTools([calc], { tool_choice: { type: 'tool', name: 'calc' } }).invoke('What is 12*34?');
    const [call] = calls(episode);
    expect(call.tools?.map((t) => t.function.name)).toEqual(['calc']);
    expect(call.messages.at(-1)).toMatchObject({ role: 'user', content: 'What is 12*34?' });
    // Forced: the generation opens as a call of calc, so the answer is one.
    expect(call.assistantMessage?.tool_calls?.map((c) => c.function.name)).toEqual(['calc']);
    expect(answer.tool_calls?.map((c) => c.name)).toEqual(['calc']);
    expect(answer.tool_calls?.[0].id).toBe(call.assistantMessage?.tool_calls?.[0].id);
  });
});
