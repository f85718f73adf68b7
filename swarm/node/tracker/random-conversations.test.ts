/**
 * Property test over random conversations, through the real Qwen3 tokenizer and template: one or two agents per
 * episode, tool calls and follow-up questions in random order, answers emitted in random pieces (drift).
 */
import { describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import type { CallRecord } from '../../common/timeline/call.ts';
import type { MergeResult } from '../../common/timeline/merge.ts';
import { loadQwen3, qwen3AnswerText, scriptedCall, type ScriptedAnswer } from './testing/qwen3.ts';
import { EpisodeTracker } from './tracker.ts';
import { seededRandom } from '../../../worker/common/random.ts';

const WORDS = [
  'hello',
  'world',
  'Paris',
  'temperature',
  'is',
  'about',
  '42',
  'degrees',
  'the',
  'weather',
  'tomorrow',
  'rain',
  'sunny',
  'ok',
  'lookup',
];
const tools: ToolSpec[] = [
  {
    type: 'function',
    function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
  },
];

interface Expectation {
  call: number;
  /** What the merger must decide for this call, given how the conversation went on. */
  reason: 'first-call' | 'different-agent' | 'extends-timeline' | 'generated-history-rewritten';
}

function playRandomEpisode(seed: number): { tracker: EpisodeTracker; expected: Expectation[] } {
  const random = seededRandom(seed);
  const int = (n: number) => Math.floor(random() * n);
  const sentence = (n: number) => Array.from({ length: n }, () => WORDS[int(WORDS.length)]).join(' ');
  const { tokenizer, template } = loadQwen3();
  const tracker = new EpisodeTracker({ episodeId: `random-${seed}`, tokenizer, template });
  const agents = Array.from({ length: 1 + int(2) }, (_, a) => ({
    messages: [
      { role: 'system', content: `Agent ${a}: ${sentence(3)}` },
      { role: 'user', content: sentence(4) },
    ] as ChatMessage[],
    calls: 0,
    /** Whether a user query was added since this agent's last call (Qwen3 then drops that call's reasoning). */
    newQuery: false,
  }));
  const expected: Expectation[] = [];
  const steps = 2 + int(6);
  for (let step = 0; step < steps; step++) {
    const agent = agents[int(agents.length)];
    const answer: ScriptedAnswer = {
      reasoning: sentence(1 + int(5)),
      content: random() < 0.5 ? sentence(1 + int(6)) : '',
    };
    if (random() < 0.6)
      answer.toolCalls = [
        { name: 'lookup', arguments: JSON.stringify({ q: sentence(1 + int(3)) }).replace(':', ': ') },
      ];
    const textLength = qwen3AnswerText(answer).length;
    answer.cutAt = Array.from({ length: int(4) }, () => int(textLength));

    const reason: Expectation['reason'] =
      agent.calls > 0
        ? agent.newQuery
          ? 'generated-history-rewritten'
          : 'extends-timeline'
        : step === 0
          ? 'first-call'
          : 'different-agent';
    expected.push({ call: step, reason });
    const call = scriptedCall(tracker, [...agent.messages], answer, { tools });
    agent.calls++;
    agent.messages.push(call.assistantMessage!);
    if (call.assistantMessage!.tool_calls) {
      agent.messages.push({
        role: 'tool',
        content: sentence(2),
        tool_call_id: call.assistantMessage!.tool_calls[0].id,
      });
      agent.newQuery = false;
    } else {
      agent.messages.push({ role: 'user', content: sentence(3) });
      agent.newQuery = true;
    }
  }
  return { tracker, expected };
}

function expectMergeInvariants(calls: readonly CallRecord[], result: MergeResult): void {
  const maskedOnes = result.timelines.reduce((sum, t) => sum + t.lossMask.filter((m) => m === 1).length, 0);
  expect(maskedOnes).toBe(calls.reduce((sum, c) => sum + c.generatedIds.length, 0));
  for (const call of calls) {
    const holders = result.timelines.filter((t) => t.callIds.includes(call.callId));
    expect(holders).toHaveLength(1);
    const span = holders[0].spans.find((s) => s.callId === call.callId)!;
    expect(holders[0].tokens.slice(0, span.generatedStart)).toEqual(call.promptIds);
    expect(holders[0].tokens.slice(span.generatedStart, span.end)).toEqual(call.generatedIds);
    expect(holders[0].lossMask.slice(span.generatedStart, span.end).every((m) => m === 1)).toBe(true);
  }
  expect(result.savings.mergedTokens).toBeLessThanOrEqual(result.savings.naiveTokens);
}

describe('random conversations through the real Qwen3 tokenizer', () => {
  it('merge every generated token exactly once, splice away all drift, and explain every new timeline', () => {
    let driftPrevented = 0;
    for (let seed = 1; seed <= 15; seed++) {
      const { tracker, expected } = playRandomEpisode(seed);
      const merge = tracker.merge();
      expectMergeInvariants(tracker.calls, merge);
      expectMergeInvariants(tracker.calls, tracker.merge('naive'));
      expect(merge.decisions.map((d, i) => ({ call: i, reason: d.reason }))).toEqual(expected);
      driftPrevented += tracker.calls.reduce((n, c) => n + c.splice.driftPreventedTurns, 0);
    }
    // The random cuts really produced drift, and splicing kept those calls merged anyway.
    expect(driftPrevented).toBeGreaterThan(5);
  });
});
