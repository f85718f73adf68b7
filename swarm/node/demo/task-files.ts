/**
 * The task files a training run's agent reads: train tasks and held-out tasks ("split": "eval") in two JSONL files,
 * generated for the calculator or guess the number, or split from a user's task file. Used by the demo and by studies' runs.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { makeTasks } from './calc-format.ts';
import { makeGuessTasks } from './guess-format.ts';

export class TaskFileError extends Error {
  override name = 'TaskFileError';
}

export interface TaskFiles {
  tasks: string;
  eval: string;
  evalCount: number;
}

/** The calculator's train and held-out tasks as JSONL in the run folder (held-out ones carry "split": "eval"). */
export function writeCalculatorTasks(dir: string, options: { evalTasks: number; trainTasks: number; seed: number }): TaskFiles {
  const held = makeTasks(options.evalTasks, options.seed, 'eval', true).map((t) => ({ ...t, split: 'eval' }));
  const trainOnly = makeTasks(options.trainTasks, options.seed + 1, 'train', false);
  return writeSplit(dir, trainOnly, held);
}

/** Guess the number's train and held-out games (guess-format.ts), as JSONL in `dir`. */
export function writeGuessTasks(dir: string, options: { evalTasks: number; trainTasks: number; seed: number }): TaskFiles {
  const held = makeGuessTasks(options.evalTasks, options.seed, 'eval', true);
  const train = makeGuessTasks(options.trainTasks, options.seed + 1, 'train', false);
  return writeSplit(dir, train, held);
}

function writeSplit(dir: string, train: unknown[], held: unknown[]): TaskFiles {
  mkdirSync(dir, { recursive: true });
  const tasks = join(dir, 'train.jsonl');
  const evalFile = join(dir, 'eval.jsonl');
  writeFileSync(tasks, train.map((t) => JSON.stringify(t)).join('\n') + '\n');
  writeFileSync(evalFile, held.map((t) => JSON.stringify(t)).join('\n') + '\n');
  return { tasks, eval: evalFile, evalCount: held.length };
}

/** A user's task file: train tasks and held-out tasks split into two files the runner reads. */
export async function splitUserTasks(dir: string, path: string): Promise<TaskFiles> {
  const { openTaskSource, isHeldOut } = await import('../runner/tasks.ts');
  const pass = await openTaskSource({ path: resolve(path) });
  const train: unknown[] = [];
  const held: unknown[] = [];
  for await (const task of pass()) (isHeldOut(task) ? held : train).push(task);
  if (held.length === 0) throw new TaskFileError(`${path} has no held-out tasks: mark some with "split": "eval"`);
  if (train.length === 0) throw new TaskFileError(`${path} has no train tasks (every task is marked "split": "eval")`);
  return writeSplit(dir, train, held);
}

