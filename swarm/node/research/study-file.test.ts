/** Study files: the shipped examples validate; every kind of mistake names its key, the value and what is allowed. */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { knobOverrides, parseStudyText, plannedRuns, readStudyFile, StudyFileError } from './study-file.ts';

const examples = new URL('../../../examples/studies/', import.meta.url).pathname;

const base = `name: s
question: q
hypothesis: h
decision: { kind: difference, better: b, than: a }
base: { script: agent.ts, tasks: { file: tasks.jsonl } }
stages:
  - name: main
    steps: 2
    seeds: 2
    arms: [{ name: a }, { name: b, training: { train: { klCoef: 0.01 } } }]
`;

function refused(text: string): StudyFileError {
  try {
    parseStudyText(text, '/studies');
  } catch (err) {
    if (err instanceof StudyFileError) return err;
    throw err;
  }
  throw new Error('the study was accepted');
}

describe('study files', () => {
  it('accepts every shipped example, with paths taken from the file\'s folder', () => {
    const files = readdirSync(examples).filter((f) => f.endsWith('.study.yaml'));
    expect(files.length).toBeGreaterThanOrEqual(2);
    for (const file of files) {
      const { study } = readStudyFile(join(examples, file));
      expect(study.base.script.startsWith('/')).toBe(true);
      expect(plannedRuns(study)).toBeLessThanOrEqual(study.budget.maxRuns);
    }
  });

  it('fills the defaults and resolves relative paths', () => {
    const study = parseStudyText(base, '/studies');
    expect(study.base).toMatchObject({ model: 'builtin:tiny', script: '/studies/agent.ts', tasks: { file: '/studies/tasks.jsonl' } });
    expect(study.metric).toEqual({ kind: 'final-eval-success', k: 3 });
    expect(study.budget.firstStepMinutes).toBe(20);
    expect(study.budget.runWallMinutes).toBe(24 * 60);
    expect(study.restarts).toBe(2);
    expect(plannedRuns(study)).toBe(4);
  });

  it.each([
    ['a bad training value', base.replace('klCoef: 0.01', 'klCoef: -1'), 'stages.0.arms.1.training.train.klCoef', 'at least 0'],
    ['an unknown key', base.replace('seeds: 2', 'seedz: 2'), 'stages.0.seedz', undefined],
    ['an unknown decision kind', base.replace('kind: difference', 'kind: diff'), 'decision.kind', 'one of "difference", "threshold"'],
    ['a decision about an arm that is not in the last stage', base.replace('better: b', 'better: c'), 'decision.better', 'one of "a", "b"'],
    ['an arm named twice', base.replace('{ name: b,', '{ name: a,'), 'stages.0.arms.1.name', undefined],
    ['a stage with neither arms nor a search', base.replace(/ {4}arms: .*\n/, ''), 'stages.0', undefined],
    ['a space over something that is not a training setting', base.replace(/ {4}arms: .*\n/, '    search: { strategy: grid, space: { train.learningRat: { values: [1] } } }\n').replace('better: b, than: a', 'better: x, than: y'), 'stages.0.search.space.train.learningRat', undefined],
    ['more runs than the budget', base + 'budget: { maxRuns: 3 }\n', 'budget.maxRuns', 'at least 4'],
    ['a minimum rung above the stage\'s steps', base.replace(/ {4}arms: .*\n/, '    search: { strategy: successive-halving, space: { train.learningRate: { min: 0.0001, max: 0.01, log: true } }, trials: 4, minSteps: 5 }\n').replace('kind: difference, better: b, than: a', 'kind: threshold, arm: best, atLeast: 0.5'), 'stages.0.search.minSteps', 'at most 2'],
    ['a log range from 0', base.replace(/ {4}arms: .*\n/, '    search: { strategy: random, trials: 2, space: { train.learningRate: { min: 0, max: 0.01, log: true } } }\n').replace('kind: difference, better: b, than: a', 'kind: threshold, arm: best, atLeast: 0.5'), 'stages.0.search.space.train.learningRate', undefined],
    ['YAML that does not parse', 'name: [', null, undefined],
  ])('refuses %s, naming the key', (_what, text, key, allowed) => {
    const error = refused(text);
    expect(error.name).toBe('StudyFileError');
    expect(error.key).toBe(key);
    if (allowed !== undefined) expect(error.allowed).toBe(allowed);
  });

  it('turns knob paths into training overrides', () => {
    expect(knobOverrides({ 'train.learningRate': 1e-3, groupSize: 4, 'train.klCoef': 0 })).toEqual({ train: { learningRate: 1e-3, klCoef: 0 }, groupSize: 4 });
  });
});
