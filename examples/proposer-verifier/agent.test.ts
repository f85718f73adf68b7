import { describe, expect, it } from 'vitest';
import { verifierDemonstration } from '../../swarm/node/demo/sft-corpus.ts';
import { CALC_TOOL } from '../../swarm/node/demo/calc-format.ts';
import { answersToJudge, calc, checkExpression, TOOLS, verdictOf } from './agent.ts';

describe('the team agent', () => {
  it('its calculator evaluates an expression and checks a claimed result against one', () => {
    expect(calc('34*80')).toBe('2720');
    expect(calc('2720==34*80')).toBe('true');
    expect(calc('2600==34*80')).toBe('false');
    expect(calc('34*80 == 2720')).toBe('true');
    expect(calc('-5==2-7')).toBe('true');
  });

  it('declares its tool as the calculator does, which is what the builtin warm starts were trained on', () => {
    expect(TOOLS).toEqual([CALC_TOOL]);
  });

  it('its calculator refuses what it cannot evaluate', () => {
    for (const bad of ['', '==', '1==2==3', '2720==34/80', 'x==34*80', '34*80==', '2**3']) expect(calc(bad)).toBe('error');
  });

  it('the warm start demonstrates the check the agent answers, and verdicts that follow it as often as asked', () => {
    let seed = 1;
    const rand = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const task = { id: 't', question: 'What is 34*80?', expression: '34*80', answer: 2720 };
    let followed = 0;
    const runs = 400;
    for (let i = 0; i < runs; i++) {
      const messages = verifierDemonstration(task, rand, 0.5, 0.7);
      const call = messages[2].tool_calls![0];
      const expr = (JSON.parse(call.function.arguments) as { expr: string }).expr;
      const proposal = /^Answer (-?\d+)\./.exec(messages[1].content as string)![1];
      expect(expr).toBe(checkExpression(proposal, task));
      expect(messages[3].content).toBe(calc(expr));
      if ((verdictOf(messages[4].content as string) === 'accept') === (messages[3].content === 'true')) followed++;
    }
    expect(followed / runs).toBeGreaterThan(0.6);
    expect(followed / runs).toBeLessThan(0.8);
  });

  it('in training the verifier judges right and wrong answers half and half, the proposer\'s own when of the side drawn', () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const task = { answer: 2720 };
    for (const proposal of ['2720', '2600', '']) {
      const judged = Array.from({ length: 400 }, () => answersToJudge(proposal, task, 'train', rand));
      expect(judged.every((j) => j.length === 1)).toBe(true);
      const answers = judged.map(([j]) => j);
      const right = answers.filter((j) => j.right).length / answers.length;
      expect(right).toBeGreaterThan(0.4);
      expect(right).toBeLessThan(0.6);
      for (const j of answers) {
        expect(j.right).toBe(j.answer === '2720');
        expect(j.planted).toBe(j.answer !== proposal);
      }
      if (proposal === '2600') expect(new Set(answers.map((j) => j.answer))).toEqual(new Set(['2720', '2600']));
      else expect(answers.every((j) => j.answer === '2720' || (Math.abs(Number(j.answer) - 2720) <= 10 && j.answer !== '2720'))).toBe(true);
    }
  });

  it('held out the verifier judges the proposer\'s answer first, then one of the other kind', () => {
    const rand = () => 0.3;
    const task = { answer: 2720 };
    expect(answersToJudge('2720', task, 'eval', rand)).toEqual([
      { answer: '2720', right: true, planted: false },
      { answer: '2716', right: false, planted: true },
    ]);
    for (const proposal of ['2600', '']) {
      expect(answersToJudge(proposal, task, 'eval', rand)).toEqual([
        { answer: proposal, right: false, planted: false },
        { answer: '2720', right: true, planted: true },
      ]);
    }
  });
});
