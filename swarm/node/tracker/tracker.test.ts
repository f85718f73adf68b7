import { describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { mergeTimelines } from '../../common/timeline/merge.ts';
import { renderPrompt } from './render.ts';
import { parseAssistantOutput } from '../../../worker/tokenizer/tool-calls.ts';
import { generatedIdsFor, loadQwen3, scriptedCall, type ScriptedAnswer } from './testing/qwen3.ts';
import { toMergeCalls } from '../../common/timeline/call.ts';
import { ContextTracker, EpisodeTracker, type RecordCallInput } from './tracker.ts';
import type { RenderedPrompt } from './render.ts';

const tools: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } } },
    },
  },
  {
    type: 'function',
    function: {
      name: 'convert',
      description: 'Convert units',
      parameters: { type: 'object', properties: { celsius: { type: 'number' } } },
    },
  },
];

function newTracker(episodeId = 'ep1'): EpisodeTracker {
  const { tokenizer, template } = loadQwen3();
  return new EpisodeTracker({ episodeId, tokenizer, template });
}

function toolResult(callMessage: ChatMessage, content: string): ChatMessage {
  return { role: 'tool', content, tool_call_id: callMessage.tool_calls![0].id };
}

/** Plays an agent loop: each answer's message is appended, then its tool results, then the next call is made. */
function playToolEpisode(tracker: EpisodeTracker, start: ChatMessage[], answers: ScriptedAnswer[]) {
  const messages = [...start];
  for (const answer of answers) {
    const call = scriptedCall(tracker, [...messages], answer, { tools });
    messages.push(call.assistantMessage!);
    if (call.assistantMessage!.tool_calls)
      messages.push(toolResult(call.assistantMessage!, `{"result": ${tracker.calls.length * 7}}`));
  }
  return messages;
}

/** Records a call of `messages` that generated exactly `generatedIds`. */
function recordGeneration(
  tracker: EpisodeTracker,
  messages: ChatMessage[],
  rendered: RenderedPrompt,
  generatedIds: number[],
  assistantMessage: ChatMessage,
  extra: Partial<RecordCallInput> = {},
) {
  return tracker.record({
    messages,
    rendered,
    generatedIds,
    logprobs: generatedIds.map(() => -1),
    assistantMessage,
    finishReason: 'stop',
    policyVersion: 0,
    timings: { startedAt: '2026-01-01T00:00:00Z', firstTokenAt: null, endedAt: '2026-01-01T00:00:01Z' },
    ...extra,
  });
}

const weatherAnswers: ScriptedAnswer[] = [
  {
    reasoning: 'I need the weather in Paris.',
    toolCalls: [{ name: 'get_weather', arguments: '{"city": "Paris"}' }],
  },
  {
    reasoning: 'Now convert to Fahrenheit.',
    content: 'Converting.',
    toolCalls: [{ name: 'convert', arguments: '{"celsius": 7}' }],
  },
  { reasoning: 'Done.', content: 'It is 7°C (44.6°F) in Paris.' },
];

describe('context tracker with the real Qwen3 tokenizer and template', () => {
  it('merges an append-only multi-turn tool-using episode into one timeline', () => {
    const tracker = newTracker();
    playToolEpisode(
      tracker,
      [
        { role: 'system', content: 'You are a weather agent.' },
        { role: 'user', content: 'Weather in Paris, in F?' },
      ],
      weatherAnswers,
    );
    const merge = tracker.merge();

    expect(merge.decisions.map((d) => [d.action, d.reason])).toEqual([
      ['started', 'first-call'],
      ['joined', 'extends-timeline'],
      ['joined', 'extends-timeline'],
    ]);
    expect(merge.timelines).toHaveLength(1);
    const last = tracker.calls[2];
    // The timeline is exactly the last call's prompt and generation, with only generated tokens trained on.
    expect(merge.timelines[0].tokens).toEqual([...last.promptIds, ...last.generatedIds]);
    const generated = tracker.calls.reduce((n, c) => n + c.generatedIds.length, 0);
    expect(merge.timelines[0].lossMask.filter((m) => m === 1)).toHaveLength(generated);
    expect(tracker.calls.map((c) => [c.splice.assistantTurns, c.splice.splicedTurns])).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
    ]);
    expect(merge.savings.mergedTokens).toBeLessThan(merge.savings.naiveTokens);
    expect(merge.savings.mergeRate).toBe(1);
  });

  it('matches repeated identical answers to their own calls, so an episode of same-text turns stays one timeline', () => {
    const { tokenizer, template } = loadQwen3();
    const tracker = newTracker();
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Confirm each step.' },
      { role: 'user', content: 'Step 1.' },
    ];
    // The same text every turn, emitted in other pieces each time (a sampler's split, a random model's bytes).
    const cuts = [[], [2], [6], [1, 7], [3, 9]];
    for (const [turn, cutAt] of cuts.entries()) {
      const call = scriptedCall(tracker, [...messages], { content: 'Sure, done.', cutAt });
      messages.push(call.assistantMessage!, { role: 'user', content: `Step ${turn + 2}.` });
    }
    const generated = tracker.calls.map((c) => c.generatedIds.join(','));
    expect(new Set(generated).size).toBe(cuts.length);
    expect(tokenizer.decode(tracker.calls[3].generatedIds)).toBe(
      tokenizer.decode(tracker.calls[0].generatedIds),
    );

    // Assistant turn k of every request is spliced with call k's own ids.
    for (const call of tracker.calls) {
      expect(call.splice.turns.map((t) => [t.outcome, t.callId])).toEqual(
        tracker.calls.slice(0, call.index).map((earlier) => ['spliced', earlier.callId]),
      );
    }
    const merge = tracker.merge();
    expect(merge.timelines).toHaveLength(1);
    expect(merge.decisions.slice(1).every((d) => d.reason === 'extends-timeline')).toBe(true);
    expect(merge.savings.mergeRate).toBe(1);

    // Without the calls' prompt ids, the order of the calls alone still matches each turn to its own call.
    const history = tracker.calls.map(({ callId, generatedIds, assistantMessage }) => ({
      callId,
      generatedIds,
      assistantMessage,
    }));
    const byOrder = renderPrompt({ tokenizer, template, messages, history });
    expect(byOrder.splice.turns.map((t) => t.callId)).toEqual(tracker.calls.map((c) => c.callId));
    expect(byOrder.promptIds).toEqual(tracker.render(messages).promptIds);
  });

  it('keeps a tool episode on one timeline when the template re-formats the tool-call JSON the model wrote', () => {
    const { tokenizer, template } = loadQwen3();
    const tracker = newTracker();
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are a weather agent.' },
      { role: 'user', content: 'Weather in Paris, in F?' },
    ];
    // The model writes compact JSON; the template renders arguments its own way ({"city": "Paris"}).
    const compactAnswers: ScriptedAnswer[] = [
      { reasoning: 'Look up.', toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] },
      { reasoning: 'Convert.', toolCalls: [{ name: 'convert', arguments: '{"celsius":7}' }] },
      { reasoning: 'Done.', content: '44.6°F.' },
    ];
    let nextId = 0;
    for (const answer of compactAnswers) {
      const rendered = tracker.render([...messages], { tools });
      const generatedIds = generatedIdsFor(tokenizer, answer);
      // The gateway's way: parse the generated text with the real Hermes parser.
      const text = tokenizer.decode(generatedIds, { skipSpecialTokens: true });
      const parsed = parseAssistantOutput(text, template.toolCallFormat, {
        newToolCallId: () => `id${nextId++}`,
      });
      const assistantMessage: ChatMessage = {
        role: 'assistant',
        content: parsed.content,
        reasoning_content: parsed.reasoning,
      };
      if (parsed.toolCalls.length > 0) assistantMessage.tool_calls = parsed.toolCalls;
      tracker.record({
        messages: [...messages],
        tools,
        rendered,
        generatedIds,
        logprobs: generatedIds.map(() => -0.5),
        assistantMessage,
        finishReason: 'stop',
        policyVersion: 1,
        timings: { startedAt: '2026-01-01T00:00:00Z', firstTokenAt: null, endedAt: '2026-01-01T00:00:01Z' },
      });
      messages.push(assistantMessage);
      if (assistantMessage.tool_calls) messages.push(toolResult(assistantMessage, '{"celsius": 7}'));
    }
    expect(tracker.render(messages, { tools }).text).toContain('{"city": "Paris"}');
    expect(tracker.merge().decisions.map((d) => d.reason)).toEqual([
      'first-call',
      'extends-timeline',
      'extends-timeline',
    ]);
    expect(tracker.calls[2].splice.turns.map((t) => [t.outcome, t.normalized])).toEqual([
      ['spliced', true],
      ['spliced', true],
    ]);
  });

  it('splices the generated ids of a turn that re-tokenizes differently, which keeps the prefix', () => {
    const { tokenizer, template } = loadQwen3();
    const tracker = newTracker();
    const drifting: ScriptedAnswer = {
      reasoning: 'Greet, then look up.',
      content: 'hello world',
      toolCalls: [{ name: 'get_weather', arguments: '{"city": "Oslo"}' }],
      splitAt: ['lo world'], // the sampler emitted "hel" + "lo": the tokenizer spells "hello" as one token
    };
    const messages = playToolEpisode(
      tracker,
      [
        { role: 'system', content: 'Agent.' },
        { role: 'user', content: 'Hi, weather in Oslo?' },
      ],
      [drifting, { reasoning: 'ok', content: 'Cold.' }],
    );
    const [first, second] = tracker.calls;
    expect(second.splice.turns[0]).toMatchObject({
      outcome: 'spliced',
      callId: first.callId,
      driftPrevented: true,
    });
    expect(tracker.merge().decisions[1]).toMatchObject({ action: 'joined', reason: 'extends-timeline' });

    // Without splicing, the same request re-tokenizes "hello" and the prefix breaks inside the first output.
    const plain = renderPrompt({ tokenizer, template, messages: messages.slice(0, 4), tools, history: [] });
    expect(plain.text).toBe(tracker.render(messages.slice(0, 4), { tools }).text);
    const unspliced = mergeTimelines(toMergeCalls([first, { ...second, promptIds: plain.promptIds }]));
    const helPosition = first.promptIds.length + first.generatedIds.indexOf(tokenizer.encode('hel')[0]);
    expect(unspliced.decisions[1]).toMatchObject({
      action: 'started',
      reason: 'generated-history-rewritten',
      divergedAt: helPosition,
    });
  });

  it('starts a new timeline, and says why, when the template drops the reasoning of earlier turns', () => {
    const tracker = newTracker();
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'What is 2+2?' },
    ];
    const first = scriptedCall(tracker, [...messages], { reasoning: 'Simple sum.', content: '4' });
    messages.push(first.assistantMessage!, { role: 'user', content: 'And 3+3?' });
    const second = scriptedCall(tracker, [...messages], { reasoning: 'Again.', content: '6' });

    // Qwen3 renders assistant turns before the last user query without their <think> block.
    expect(second.splice.turns[0]).toMatchObject({ outcome: 'template-rewrote-turn', callId: first.callId });
    const merge = tracker.merge();
    expect(merge.timelines).toHaveLength(2);
    expect(merge.decisions[1]).toMatchObject({
      action: 'started',
      reason: 'generated-history-rewritten',
      comparedTimelineId: 't0',
    });
    // It diverges right where the first answer's <think> began.
    expect(merge.decisions[1].divergedAt).toBe(first.promptIds.length);
  });

  it('keeps two interleaved agents with different system prompts on two timelines', () => {
    const tracker = newTracker();
    const planner: ChatMessage[] = [
      { role: 'system', content: 'You plan.' },
      { role: 'user', content: 'Plan a trip.' },
    ];
    const critic: ChatMessage[] = [
      { role: 'system', content: 'You critique plans.' },
      { role: 'user', content: 'Critique: go to Rome.' },
    ];
    const steps: [ChatMessage[], ScriptedAnswer][] = [
      [
        planner,
        { reasoning: 'Find cities.', toolCalls: [{ name: 'get_weather', arguments: '{"city": "Rome"}' }] },
      ],
      [
        critic,
        { reasoning: 'Check facts.', toolCalls: [{ name: 'get_weather', arguments: '{"city": "Rome"}' }] },
      ],
      [planner, { reasoning: 'Warm enough.', content: 'Go to Rome.' }],
      [critic, { reasoning: 'Fine.', content: 'Plan is fine.' }],
    ];
    for (const [conversation, answer] of steps) {
      const call = scriptedCall(tracker, [...conversation], answer, { tools });
      conversation.push(call.assistantMessage!);
      if (call.assistantMessage!.tool_calls)
        conversation.push(toolResult(call.assistantMessage!, '{"celsius": 21}'));
    }
    const merge = tracker.merge();
    expect(merge.decisions.map((d) => [d.reason, d.timelineId])).toEqual([
      ['first-call', 't0'],
      ['different-agent', 't1'],
      ['extends-timeline', 't0'],
      ['extends-timeline', 't1'],
    ]);
    expect(new Set(tracker.calls.map((c) => c.agentKey)).size).toBe(2);
    expect(merge.savings).toMatchObject({ eligibleCalls: 2, mergeRate: 1 });
  });

  it('branches parallel calls made from the same history and continues the branch the client picked', () => {
    const tracker = newTracker();
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Agent.' },
      { role: 'user', content: 'Weather in Lima?' },
    ];
    // Two calls rendered from the same history before either finished (e.g. n samples, or a retry).
    const a = scriptedCall(
      tracker,
      [...messages],
      { reasoning: 'Look up.', toolCalls: [{ name: 'get_weather', arguments: '{"city": "Lima"}' }] },
      { tools },
    );
    const b = scriptedCall(
      tracker,
      [...messages],
      { reasoning: 'Look it up.', toolCalls: [{ name: 'get_weather', arguments: '{"city": "Lima, PE"}' }] },
      { tools },
    );
    expect(b.promptIds).toEqual(a.promptIds);
    messages.push(b.assistantMessage!, toolResult(b.assistantMessage!, '{"celsius": 19}'));
    const c = scriptedCall(tracker, [...messages], { reasoning: 'Answer.', content: '19°C.' }, { tools });

    expect(c.splice.turns[0]).toMatchObject({ outcome: 'spliced', callId: b.callId });
    expect(tracker.merge().decisions.map((d) => [d.reason, d.timelineId])).toEqual([
      ['first-call', 't0'],
      ['parallel-branch', 't1'],
      ['extends-timeline', 't1'],
    ]);
  });

  it('splices the generated end-of-turn token with the turn, also when the model ended otherwise than the template', () => {
    const { tokenizer } = loadQwen3();
    const [imEnd, endOfText] = ['<|im_end|>', '<|endoftext|>'].map((t) => tokenizer.encode(t)[0]);
    const tracker = newTracker();
    const messages: ChatMessage[] = [{ role: 'user', content: 'Weather in Bern?' }];
    const first = scriptedCall(
      tracker,
      [...messages],
      { reasoning: 'Look up.', toolCalls: [{ name: 'get_weather', arguments: '{"city": "Bern"}' }] },
      { tools },
    );
    expect(first.generatedIds.at(-1)).toBe(imEnd);
    messages.push(first.assistantMessage!, toolResult(first.assistantMessage!, '{"celsius": 3}'));
    const second = scriptedCall(
      tracker,
      [...messages],
      { reasoning: 'Answer.', content: 'Cold.' },
      { tools },
    );
    expect(second.splice.turns[0]).toMatchObject({ outcome: 'spliced', tokens: first.generatedIds.length });

    // A generation that stopped on <|endoftext|> while the template closes the turn with <|im_end|>: the model's
    // own end token stands in the next prompt, so that prompt continues the sequence the model produced.
    const other = newTracker('ep2');
    const rendered = other.render([{ role: 'user', content: 'Hi' }]);
    const content = tokenizer.encode('<think>\nGreet.\n</think>\n\nHi there.');
    const generatedIds = [...content, endOfText];
    const cut = recordGeneration(other, [{ role: 'user', content: 'Hi' }], rendered, generatedIds, {
      role: 'assistant',
      content: 'Hi there.',
      reasoning_content: 'Greet.',
    });
    // A tool result follows, so Qwen3 keeps the turn's reasoning (a new user query would drop it).
    const followUp = other.render([
      { role: 'user', content: 'Hi' },
      cut.assistantMessage!,
      { role: 'tool', content: 'x', tool_call_id: 'none' },
    ]);
    expect(followUp.splice.turns[0]).toMatchObject({ outcome: 'spliced', tokens: generatedIds.length });
    expect(followUp.splice.turns[0].detail).toContain('end token');
    expect(followUp.text).toContain('Hi there.<|im_end|>');
    expect(followUp.promptIds.slice(0, rendered.promptIds.length + generatedIds.length)).toEqual([
      ...rendered.promptIds,
      ...generatedIds,
    ]);
  });

  it('splices a generation that began with whitespace the parser trimmed where the model wrote it, after the header', () => {
    const { tokenizer } = loadQwen3();
    const imEnd = tokenizer.encode('<|im_end|>')[0];
    const tracker = newTracker();
    const user: ChatMessage = { role: 'user', content: 'Hi' };
    const rendered = tracker.render([user]);
    const generatedIds = [...tokenizer.encode('\nHello.'), imEnd];
    const first = recordGeneration(tracker, [user], rendered, generatedIds, {
      role: 'assistant',
      content: 'Hello.',
    });
    const next = tracker.render([user, first.assistantMessage!, { role: 'user', content: 'More?' }]);
    expect(next.splice.turns[0]).toMatchObject({ outcome: 'spliced', tokens: generatedIds.length });
    // The template's own "assistant\n" header stays; the model's leading newline follows it.
    expect(next.promptIds.slice(0, rendered.promptIds.length + generatedIds.length)).toEqual([
      ...rendered.promptIds,
      ...generatedIds,
    ]);
  });

  it('splices a generation that was only an end token (empty answer) where the call left off', () => {
    const { tokenizer } = loadQwen3();
    const endOfText = tokenizer.encode('<|endoftext|>')[0];
    const tracker = newTracker();
    const user: ChatMessage = { role: 'user', content: 'Say nothing.' };
    const rendered = tracker.render([user]);
    const empty = recordGeneration(tracker, [user], rendered, [endOfText], {
      role: 'assistant',
      content: '',
    });
    const next = tracker.render([user, empty.assistantMessage!, { role: 'user', content: 'Thanks.' }]);
    expect(next.splice.turns[0]).toMatchObject({ outcome: 'spliced', tokens: 1 });
    expect(next.promptIds.slice(0, rendered.promptIds.length + 1)).toEqual([
      ...rendered.promptIds,
      endOfText,
    ]);
  });

  it('splices a forced tool call (tool_choice) with its forced start, so the next call extends its timeline', () => {
    const { tokenizer } = loadQwen3();
    const imEnd = tokenizer.encode('<|im_end|>')[0];
    const tracker = newTracker();
    const user: ChatMessage = { role: 'user', content: 'Weather in Oslo?' };
    const rendered = tracker.render([user], { tools });
    // The gateway starts the answer inside a tool-call block; the model writes the rest with its own spacing,
    // which the template re-serialises (so the turn is found up to tool-call formatting).
    const forcedPrefixIds = tokenizer.encode('<tool_call>\n{"name": "');
    const generatedIds = [
      ...tokenizer.encode('get_weather", "arguments": {"city":"Oslo"}}\n</tool_call>'),
      imEnd,
    ];
    const forced = recordGeneration(
      tracker,
      [user],
      { ...rendered, promptIds: [...rendered.promptIds, ...forcedPrefixIds] },
      generatedIds,
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { tools, forcedPrefixIds, finishReason: 'tool_calls' },
    );
    const messages = [
      user,
      forced.assistantMessage!,
      toolResult(forced.assistantMessage!, '{"celsius": -2}'),
    ];
    const next = scriptedCall(tracker, messages, { reasoning: 'Answer.', content: 'Cold.' }, { tools });

    expect(next.splice.turns[0]).toMatchObject({
      outcome: 'spliced',
      callId: forced.callId,
      normalized: true,
    });
    expect(next.promptIds.slice(0, forced.promptIds.length + generatedIds.length)).toEqual([
      ...forced.promptIds,
      ...generatedIds,
    ]);
    expect(tracker.merge().decisions.map((d) => d.reason)).toEqual(['first-call', 'extends-timeline']);
  });

  it("records a prefix mismatch when Qwen3's non-thinking mode does not re-render its pre-filled empty think block", () => {
    const tracker = newTracker();
    const messages: ChatMessage[] = [{ role: 'user', content: 'Weather in Rome?' }];
    const options = { tools, enableThinking: false };
    const first = scriptedCall(
      tracker,
      [...messages],
      { toolCalls: [{ name: 'get_weather', arguments: '{"city": "Rome"}' }] },
      options,
    );
    messages.push(first.assistantMessage!, toolResult(first.assistantMessage!, '{"celsius": 20}'));
    const second = scriptedCall(tracker, [...messages], { content: 'Warm.' }, options);

    expect(second.splice.turns[0].outcome).toBe('spliced');
    const decision = tracker.merge().decisions[1];
    expect(decision).toMatchObject({ action: 'started', reason: 'prefix-mismatch' });
    // The first prompt ended with "<think>\n\n</think>\n\n" (4 tokens) that the second prompt no longer has.
    expect(decision.divergedAt).toBe(first.promptIds.length - 4);
  });

  it('reports turns no call of the episode generated', () => {
    const tracker = newTracker();
    const call = scriptedCall(
      tracker,
      [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello! (written by the client)' },
        { role: 'user', content: 'Bye' },
      ],
      {
        content: 'Bye!',
      },
    );
    expect(call.splice.turns).toEqual([
      expect.objectContaining({ messageIndex: 1, outcome: 'no-generated-call', callId: null }),
    ]);
  });

  it('hands every recorded call to the sink and forgets finished episodes', () => {
    const sunk: string[] = [];
    const { tokenizer, template } = loadQwen3();
    const trackers = new ContextTracker({
      sink: (episodeId, call) => sunk.push(`${episodeId}/${call.callId}`),
    });
    const tracker = trackers.begin({ episodeId: 'e7', tokenizer, template });
    scriptedCall(tracker, [{ role: 'user', content: 'Hi' }], { content: 'Hello.' });
    expect(sunk).toEqual(['e7/e7:0']);
    expect(() => trackers.begin({ episodeId: 'e7', tokenizer, template })).toThrow(
      expect.objectContaining({ name: 'EpisodeAlreadyTrackedError' }),
    );
    expect(trackers.finish('e7').calls).toHaveLength(1);
    expect(() => trackers.get('e7')).toThrow(expect.objectContaining({ name: 'UntrackedEpisodeError' }));
  });
});
