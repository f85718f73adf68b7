import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CHECKPOINT_META, checkpointsDir, latestCheckpoint } from './checkpoints.ts';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function checkpointRoot(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-ckpt-'));
  dirs.push(dir);
  return checkpointsDir(dir, 'org/model:v1');
}

function writeCheckpoint(root: string, name: string, step: number | null) {
  mkdirSync(join(root, name), { recursive: true });
  if (step !== null) writeFileSync(join(root, name, CHECKPOINT_META), JSON.stringify({ model: 'm', step, policyVersion: step, time: '', metrics: {}, files: [] }));
}

describe('latestCheckpoint', () => {
  it('picks the highest complete step and skips unfinished or foreign folders', () => {
    const root = checkpointRoot();
    expect(latestCheckpoint(root)).toBeNull();
    writeCheckpoint(root, 'step-2', 2);
    writeCheckpoint(root, 'step-10', 10);
    writeCheckpoint(root, 'step-12', null); // crashed before its metadata was written
    writeCheckpoint(root, 'step-20.partial', 20);
    writeCheckpoint(root, 'notes', 99);
    expect(latestCheckpoint(root)).toMatchObject({ dir: join(root, 'step-10'), meta: { step: 10, policyVersion: 10 } });
  });

  it('keeps model names that are not folder-safe inside the checkpoints folder', () => {
    expect(checkpointRoot()).toMatch(/checkpoints\/org_model_v1$/);
  });

  it('rejects unreadable metadata with a named error', () => {
    const root = checkpointRoot();
    mkdirSync(join(root, 'step-3'), { recursive: true });
    writeFileSync(join(root, 'step-3', CHECKPOINT_META), '{ not json');
    expect(() => latestCheckpoint(root)).toThrow(expect.objectContaining({ name: 'CheckpointError' }));
  });
});
