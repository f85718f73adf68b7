/**
 * `agentjet serve`, `status` and `episodes` as a user runs them: real child processes. The durability check kills
 * the peer with SIGKILL right after an acknowledged `end` and reopens its store.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { episodeExportSchema } from '../../common/timeline/export.ts';
import { openStore } from '../store/db.ts';
import { readConfigFile, type ConfigFileError } from './config-file.ts';
import { listEpisodes } from '../store/episode-list.ts';
import { getCalls, getTimelines } from '../store/episode-reads.ts';
import { runCli, startPeerProcess } from '../cli/peer-process.ts';
import { initWeights } from '../../../worker/model.ts';
import { writeModelFolder } from '../../../worker/node/hf-folder.ts';
import { tinyByteConfig } from '../../../worker/testing/configs.ts';

const dirs: string[] = [];
function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-serve-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe('a model that cannot be served', () => {
  it('whose weights load but whose tokenizer is missing: the peer says so and exits (its engine thread is closed)', async () => {
    const folder = tempDir();
    const config = tinyByteConfig();
    // config.json and model.safetensors only: the engine starts, the tokenizer cannot load.
    await writeModelFolder(folder, { config, tensors: initWeights(config, 3) });
    const result = await runCli(['serve', '--model', folder, '--port', '0', '--data-dir', tempDir(), '--log-level', 'silent']);
    expect(result.code).toBe(1);
  });
});

/** What reading a config file of `text` throws (the test fails when it reads fine). */
function configFileError(file: string, text: string): ConfigFileError {
  writeFileSync(file, text);
  try {
    readConfigFile(file);
  } catch (err) {
    return err as ConfigFileError;
  }
  throw new Error('expected a ConfigFileError');
}

describe('config files', () => {
  it('name the bad key and the reason', () => {
    const dir = tempDir();
    const file = join(dir, 'agentjet.yaml');
    const errorOf = (text: string) => configFileError(file, text);
    expect(errorOf('models:\n  - source: builtin:tiny\n    poolLimit: many\n')).toMatchObject({ name: 'ConfigFileError', key: 'models.0.poolLimit' });
    expect(errorOf('prot: 1\n')).toMatchObject({ name: 'ConfigFileError', key: 'prot' });
    expect(errorOf('port: [1\n')).toMatchObject({ name: 'ConfigFileError', key: null });
    writeFileSync(file, 'port: 0\nmodels:\n  - source: builtin:tiny\n    aliases: [small]\naliases:\n  default: tiny\n');
    expect(readConfigFile(file)).toMatchObject({ port: 0, models: [{ source: 'builtin:tiny', aliases: ['small'] }], aliases: { default: 'tiny' }, baseDir: dir });
  });

  it('take training settings globally and per model, naming a bad key with its path', () => {
    const dir = tempDir();
    const file = join(dir, 'agentjet.yaml');
    const errorOf = (text: string) => configFileError(file, text);
    expect(errorOf('training:\n  groupSize: 1\n')).toMatchObject({ name: 'ConfigFileError', key: 'training.groupSize' });
    expect(errorOf('training:\n  train: { lr: 1 }\n')).toMatchObject({ name: 'ConfigFileError', key: 'training.train.lr' });
    expect(errorOf('models:\n  - source: builtin:tiny\n    training: { maxSteps: -1 }\n')).toMatchObject({ name: 'ConfigFileError', key: 'models.0.training.maxSteps' });
    writeFileSync(file, 'training:\n  groupSize: 8\n  train: { learningRate: 1.0e-4 }\nmodels:\n  - source: builtin:tiny\n    training: { train: { klCoef: 0.01 } }\n');
    expect(readConfigFile(file)).toMatchObject({ training: { groupSize: 8, train: { learningRate: 1e-4 } }, models: [{ training: { train: { klCoef: 0.01 } } }] });
  });

  it('serve applies the file, with flags over it, and refuses a flag out of range (exit 2)', async () => {
    const dir = tempDir();
    const file = join(dir, 'agentjet.yaml');
    writeFileSync(file, 'models:\n  - source: builtin:tiny\n    training: { groupSize: 6 }\ntraining:\n  batchTasks: 3\n  train: { learningRate: 1.0e-4 }\n');
    const bad = await runCli(['serve', '--config', file, '--port', '0', '--data-dir', tempDir(), '--group-size', '1']);
    expect(bad.code).toBe(2);
    const peer = await startPeerProcess(['serve', '--config', file, '--port', '0', '--data-dir', tempDir(), '--lr', '3e-4', '--mini-batches', '2', '--log-level', 'silent']);
    try {
      const res = await fetch(`${peer.ready.apiUrl}/models/tiny/training`, { headers: { authorization: `Bearer ${peer.ready.token}` } });
      const state = (await res.json()) as { config: { batchTasks: number; groupSize: number; train: { learningRate: number; klCoef: number; miniBatches: number } }; runId: string };
      // The flag over the file, the model's own key over the global ones, the built-in model's default KL below them.
      expect(state.config).toMatchObject({ batchTasks: 3, groupSize: 6, train: { learningRate: 3e-4, klCoef: 0.001, miniBatches: 2 } });
      expect(state.runId).toBe('tiny-1');
      expect(peer.ready.runs).toEqual([{ model: 'tiny', id: 'tiny-1', name: 'tiny-1', step: 0 }]);
    } finally {
      await peer.stop();
    }
  });
});

describe('agentjet serve: usage errors exit with 2', () => {
  it('for a bad config file (naming the key) and for no model at all', async () => {
    const dir = tempDir();
    const file = join(dir, 'agentjet.yaml');
    writeFileSync(file, 'models:\n  - source: builtin:tiny\n    poolLimit: many\n');
    const bad = await runCli(['serve', '--config', file, '--data-dir', dir]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('models.0.poolLimit');
    expect((await runCli(['serve', '--data-dir', dir])).code).toBe(2);
  }, 200_000);
});

describe('agentjet serve with builtin:tiny', () => {
  it('keeps an acknowledged end through SIGKILL, and the CLI shows and exports it', async () => {
    const dataDir = tempDir();
    const config = join(dataDir, 'agentjet.json');
    writeFileSync(config, JSON.stringify({ port: 0, logLevel: 'warn', models: [{ source: 'builtin:tiny', aliases: ['small'] }] }));
    const peer = await startPeerProcess(['serve', '--config', config, '--data-dir', dataDir]);
    try {
      const post = async (path: string, body: unknown) => {
        const res = await fetch(`http://127.0.0.1:${peer.ready.port}/swarm/v1${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${peer.ready.token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return (await res.json()) as Record<string, unknown>;
      };
      const episode = (await post('/episodes', { model: 'small', taskId: 'durable' })) as unknown as CreateEpisodeResponse;
      expect(episode.model).toBe('tiny');
      const openai = new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
      await openai.chat.completions.create({ model: 'small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });

      const minted = await runCli(['client-key', 'runner-1', '--data-dir', dataDir]);
      const byClientKey = await fetch(`http://127.0.0.1:${peer.ready.port}/swarm/v1/status`, { headers: { authorization: `Bearer ${minted.stdout.trim()}` } });
      expect(byClientKey.status).toBe(200);

      const status = await runCli(['status', '--data-dir', dataDir]);
      expect(status.code).toBe(0);
      expect(status.stdout).toMatch(/tiny\s+rolling/);

      const ack = await post(`/episodes/${episode.episodeId}/end`, { reward: 1 });
      expect(ack.state).toBe('ended');

      const list = await runCli(['episodes', 'list', '--data-dir', dataDir]);
      expect(list.stdout).toContain(episode.episodeId);
      const out = join(dataDir, 'export.json');
      const exported = await runCli(['episodes', 'export', episode.episodeId, '--out', out, '--data-dir', dataDir]);
      expect(exported.code).toBe(0);
      const doc = episodeExportSchema.parse(JSON.parse(readFileSync(out, 'utf8')));
      expect(doc.calls).toHaveLength(1);

      peer.child.kill('SIGKILL');
      await once(peer.child, 'exit');
    } finally {
      // After SIGKILL the child has a signalCode and no exitCode: stop() would wait for an exit that already happened.
      if (peer.child.exitCode === null && peer.child.signalCode === null) await peer.stop();
    }
    const db = openStore(join(dataDir, 'agentjet.sqlite'));
    try {
      const { episodes: [stored] } = listEpisodes(db, { taskId: 'durable' });
      expect(stored).toMatchObject({ state: 'ended', reward: 1 });
      expect(getCalls(db, stored.id)).toHaveLength(1);
      expect(getTimelines(db, stored.id)!.timelines).toHaveLength(1);
    } finally {
      db.close();
    }
    // The peer is gone: the CLI says so instead of hanging.
    expect((await runCli(['status', '--data-dir', dataDir])).code).toBe(1);
  }, 400_000);
});
