/**
 * `agentjet client-key NAME`: mints a key that lets a named client (a runner or SDK on another machine) start and
 * end episodes on this peer's /swarm/v1. Signed with the node's secret, so it stays valid across restarts.
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { mintClientKey } from '../episodes/keys.ts';
import { loadOrCreateIdentity } from '../identity.ts';
import { dataPaths, defaultDataDir } from '../paths.ts';
import { UsageError, type Command } from './command.ts';
import { dataDirOption, dataDirUsage } from './peer-client.ts';

export const clientKeyCommand: Command = {
  name: 'client-key',
  summary: 'mint a key for a named client to start episodes on this peer (/swarm/v1)',
  usage: `agentjet client-key NAME [options]

Options:
${dataDirUsage}`,
  options: { ...dataDirOption },
  positionals: { min: 1, max: 1, names: 'the client name' },
  async run(values, [name]) {
    const dataDir = values['data-dir'] ? resolve(values['data-dir'] as string) : defaultDataDir();
    mkdirSync(dataDir, { recursive: true });
    const identity = loadOrCreateIdentity(dataPaths(dataDir).identity);
    try {
      process.stdout.write(mintClientKey(identity.secret, name) + '\n');
    } catch (err) {
      if (err instanceof TypeError) throw new UsageError(err.message);
      throw err;
    }
    return 0;
  },
};
