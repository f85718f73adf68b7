/**
 * Test helper: the quickest study that finishes. Two arms (learning rate 0, and the built-in model's default), two
 * seeds each, one optimizer step per run on the smallest batch (one group of two), four held-out tasks: the fewest
 * episodes a run can be made of. The caller gives the question, hypothesis and decision criterion.
 */
const repoFile = (path: string) => new URL(`../../../../${path}`, import.meta.url).pathname;

export interface QuickStudy {
  name: string;
  question: string;
  hypothesis: string;
  /** The decision as YAML flow, e.g. `{ kind: difference, better: default, than: zero }`. */
  decision: string;
}

export function quickStudyText(study: QuickStudy): string {
  return `name: ${study.name}
question: ${study.question}
hypothesis: ${study.hypothesis}
decision: ${study.decision}
base:
  model: builtin:tiny
  script: ${repoFile('examples/calculator/agent.ts')}
  reward: ${repoFile('examples/calculator/reward.ts')}
  tasks: { calculator: { train: 200, eval: 4, seed: 7 } }
  training: { batchTasks: 1, groupSize: 2 }
  evalConcurrency: 4
metric: { kind: final-eval-success }
stages:
  - name: main
    steps: 1
    seeds: 2
    arms:
      - { name: zero, training: { train: { learningRate: 0 } } }
      - { name: default }
concurrency: 2
`;
}
