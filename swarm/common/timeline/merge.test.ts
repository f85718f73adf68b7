import { describe, expect, it } from 'vitest';
import { mergeTimelines, type MergeCall, type MergeResult } from './merge.ts';
import { seededRandom } from '../../../worker/common/random.ts';

/** A call whose generated tokens get logprobs -0.1, -0.2, … so that misplaced logprobs show. */
function call(
  callId: string,
  promptIds: number[],
  generatedIds: number[],
  agentKey?: string,
  policyVersion = 0,
): MergeCall {
  return {
    callId,
    promptIds,
    generatedIds,
    generatedLogprobs: generatedIds.map((_, i) => -(i + 1) / 10),
    policyVersion,
    agentKey,
  };
}

describe('mergeTimelines', () => {
  it('merges an append-only conversation into one timeline with prompt tokens masked out', () => {
    const c1 = call('c1', [1, 2, 3], [10, 11]);
    const c2 = call('c2', [1, 2, 3, 10, 11, 4, 5], [12]);
    const c3 = call('c3', [1, 2, 3, 10, 11, 4, 5, 12, 6], [13, 14]);
    const result = mergeTimelines([c1, c2, c3]);

    expect(result.timelines).toHaveLength(1);
    const [timeline] = result.timelines;
    expect(timeline.tokens).toEqual([1, 2, 3, 10, 11, 4, 5, 12, 6, 13, 14]);
    expect(timeline.lossMask).toEqual([0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1]);
    expect(timeline.logprobs).toEqual([0, 0, 0, -0.1, -0.2, 0, 0, -0.1, 0, -0.1, -0.2]);
    expect(timeline.callIds).toEqual(['c1', 'c2', 'c3']);
    expect(
      result.decisions.map((d) => [d.action, d.reason, d.sharedPrefixTokens, d.newPromptTokens]),
    ).toEqual([
      ['started', 'first-call', 0, 3],
      ['joined', 'extends-timeline', 5, 2],
      ['joined', 'extends-timeline', 8, 1],
    ]);
    expect(result.savings).toMatchObject({
      naiveTokens: 5 + 8 + 11,
      mergedTokens: 11,
      savedTokens: 13,
      eligibleCalls: 2,
      joinedCalls: 2,
      mergeRate: 1,
    });
  });

  it('starts a new timeline when the prompt diverges and records where', () => {
    const c1 = call('c1', [1, 2, 3], [10, 11]);
    const editedPrompt = call('c2', [1, 2, 9, 10, 11, 4], [12]);
    const rewrittenOutput = call('c3', [1, 2, 3, 10, 99, 4], [13]);
    const result = mergeTimelines([c1, editedPrompt, rewrittenOutput]);

    expect(result.timelines).toHaveLength(3);
    expect(result.decisions[1]).toMatchObject({
      action: 'started',
      reason: 'prefix-mismatch',
      divergedAt: 2,
      comparedTimelineId: 't0',
      sharedPrefixTokens: 2,
    });
    expect(result.decisions[2]).toMatchObject({
      action: 'started',
      reason: 'generated-history-rewritten',
      divergedAt: 4,
      comparedTimelineId: 't0',
    });
    expect(result.savings.mergeRate).toBe(0);
  });

  it('keeps two agents apart and lets each extend its own timeline', () => {
    const result = mergeTimelines([
      call('a1', [1, 2], [10], 'planner'),
      call('b1', [1, 3], [20], 'coder'),
      call('a2', [1, 2, 10, 4], [11], 'planner'),
      call('b2', [1, 3, 20, 5], [21], 'coder'),
    ]);
    expect(result.timelines.map((t) => t.callIds)).toEqual([
      ['a1', 'a2'],
      ['b1', 'b2'],
    ]);
    expect(result.decisions.map((d) => d.reason)).toEqual([
      'first-call',
      'different-agent',
      'extends-timeline',
      'extends-timeline',
    ]);
    // The first call of each agent could not have joined: 2 eligible calls, both joined.
    expect(result.savings).toMatchObject({ eligibleCalls: 2, mergeRate: 1 });
  });

  it('branches parallel calls from the same prompt and continues each branch', () => {
    const result = mergeTimelines([
      call('p1', [1, 2, 3], [10, 11]),
      call('p2', [1, 2, 3], [12]),
      call('p3', [1, 2, 3, 12, 4], [13]),
      call('p4', [1, 2, 3, 10, 11, 5], [14]),
    ]);
    expect(result.decisions.map((d) => [d.callId, d.action, d.reason, d.timelineId])).toEqual([
      ['p1', 'started', 'first-call', 't0'],
      ['p2', 'started', 'parallel-branch', 't1'],
      ['p3', 'joined', 'extends-timeline', 't1'],
      ['p4', 'joined', 'extends-timeline', 't0'],
    ]);
  });

  it('joins the longest matching timeline', () => {
    const result = mergeTimelines([
      call('c1', [1], [2]),
      call('c2', [1], [3]), // parallel branch: t1 = [1, 3]
      call('c3', [1, 3, 4], [5]), // extends t1 = [1, 3, 4, 5]
      call('c4', [1, 3, 4, 5, 6], [7]), // t0 = [1, 2] is not a prefix; t1 is
    ]);
    expect(result.decisions[3]).toMatchObject({ action: 'joined', timelineId: 't1', sharedPrefixTokens: 4 });
  });

  it('reports a truncated history', () => {
    const result = mergeTimelines([
      call('c1', [1, 2], [3]),
      call('c2', [1, 2, 3, 4], [5]),
      call('c3', [1, 2, 3], [6]),
    ]);
    expect(result.decisions[2]).toMatchObject({
      action: 'started',
      reason: 'history-truncated',
      sharedPrefixTokens: 3,
    });
  });

  it('in naive mode gives every call its own sample', () => {
    const calls = [call('c1', [1, 2], [3]), call('c2', [1, 2, 3, 4], [5])];
    const result = mergeTimelines(calls, 'naive');
    expect(result.timelines.map((t) => t.tokens)).toEqual([
      [1, 2, 3],
      [1, 2, 3, 4, 5],
    ]);
    expect(result.decisions.map((d) => d.reason)).toEqual(['naive-mode', 'naive-mode']);
    expect(result.savings).toMatchObject({ naiveTokens: 8, mergedTokens: 8, mergeRate: 0 });
  });

  it('rejects logprobs that do not line up with the generated ids', () => {
    const bad = { ...call('c1', [1], [2, 3]), generatedLogprobs: [-1] };
    expect(() => mergeTimelines([bad])).toThrow(
      expect.objectContaining({ name: 'TimelineInputError', callId: 'c1' }),
    );
  });
});


/**
 * A random multi-agent episode at token level: each agent appends to its history most of the time, and now and
 * then branches from an earlier prompt (parallel call), edits a token of its history, or drops its latest turns.
 */
function randomEpisode(seed: number): MergeCall[] {
  const random = seededRandom(seed);
  const int = (n: number) => Math.floor(random() * n);
  const tokens = (n: number) => Array.from({ length: n }, () => int(50));
  const agents = Array.from({ length: 1 + int(3) }, (_, a) => ({
    key: `agent${a}`,
    history: [100 + a, ...tokens(1 + int(4))],
    lastPrompt: [] as number[],
  }));
  const calls: MergeCall[] = [];
  const callCount = 1 + int(12);
  for (let i = 0; i < callCount; i++) {
    const agent = agents[int(agents.length)];
    const action = random();
    let prompt: number[];
    if (action < 0.15 && agent.lastPrompt.length > 0) prompt = [...agent.lastPrompt];
    else if (action < 0.25 && agent.history.length > 2) {
      prompt = [...agent.history];
      prompt[1 + int(prompt.length - 1)] = int(50);
    } else if (action < 0.32 && agent.history.length > 2)
      prompt = agent.history.slice(0, 1 + int(agent.history.length - 1));
    else prompt = [...agent.history, ...tokens(int(4))];
    const generated = tokens(int(5));
    calls.push({
      callId: `c${i}`,
      promptIds: prompt,
      generatedIds: generated,
      generatedLogprobs: generated.map(() => -random() * 5),
      policyVersion: int(3),
      agentKey: agent.key,
    });
    agent.lastPrompt = prompt;
    agent.history = [...prompt, ...generated];
  }
  return calls;
}

/** Checks the invariants every merge must keep; returns nothing, throws on the first broken one. */
function expectMergeInvariants(calls: MergeCall[], result: MergeResult): void {
  let maskedOnes = 0;
  for (const timeline of result.timelines) {
    maskedOnes += timeline.lossMask.reduce((sum, m) => sum + m, 0);
    expect(timeline.tokens.length).toBe(timeline.lossMask.length);
    expect(timeline.tokens.length).toBe(timeline.logprobs.length);
  }
  // Every generated token is in exactly one timeline with mask 1 (counts match and each call's span holds its own).
  expect(maskedOnes).toBe(calls.reduce((sum, c) => sum + c.generatedIds.length, 0));
  calls.forEach((c, i) => {
    const holders = result.timelines.filter((t) => t.callIds.includes(c.callId));
    expect(holders).toHaveLength(1);
    const [timeline] = holders;
    expect(result.decisions[i].timelineId).toBe(timeline.timelineId);
    const span = timeline.spans.find((s) => s.callId === c.callId)!;
    // The generated tokens see exactly the call's prompt as their context: the loss equals the per-call loss.
    expect(timeline.tokens.slice(0, span.generatedStart)).toEqual(c.promptIds);
    expect(timeline.tokens.slice(span.generatedStart, span.end)).toEqual(c.generatedIds);
    expect(timeline.lossMask.slice(span.generatedStart, span.end).every((m) => m === 1)).toBe(true);
    expect(timeline.lossMask.slice(span.promptStart, span.generatedStart).every((m) => m === 0)).toBe(true);
    expect(timeline.logprobs.slice(span.generatedStart, span.end)).toEqual(c.generatedLogprobs);
  });
  expect(result.savings.mergedTokens).toBeLessThanOrEqual(result.savings.naiveTokens);
}

describe('mergeTimelines on random episodes', () => {
  it('keeps every generated token exactly once, in its own context, and never costs more than naive', () => {
    let joined = 0;
    const reasons = new Set<string>();
    for (let seed = 1; seed <= 200; seed++) {
      const calls = randomEpisode(seed);
      const result = mergeTimelines(calls);
      expectMergeInvariants(calls, result);
      expectMergeInvariants(calls, mergeTimelines(calls, 'naive'));
      joined += result.savings.joinedCalls;
      for (const d of result.decisions) reasons.add(d.reason);
    }
    // The generator exercises joins and every kind of split, so the invariants were checked on all of them.
    expect(joined).toBeGreaterThan(50);
    expect([...reasons].sort()).toEqual(
      [
        'different-agent',
        'extends-timeline',
        'first-call',
        'generated-history-rewritten',
        'history-truncated',
        'parallel-branch',
        'prefix-mismatch',
      ].sort(),
    );
  });
});
