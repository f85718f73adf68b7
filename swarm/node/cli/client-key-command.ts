/**
 * `agentjet client-key NAME [--ttl-days N] [--revoke]`: mints a key that lets a named client (a runner or SDK on
 * another machine) start episodes on this peer's /swarm/v1 in its own name and end or abort only those. Signed with
 * the node's secret, it holds across restarts until it expires; `--revoke` ends every key of the client minted so
 * far (the peer refuses them at once) and prints a fresh one.
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { DEFAULT_CLIENT_KEY_TTL_S, MAX_CLIENT_KEY_TTL_S, mintClientKey } from '../episodes/keys.ts';
import { loadOrCreateIdentity } from '../identity.ts';
import { dataPaths, defaultDataDir } from '../paths.ts';
import { clientKeyGeneration, revokeClientKeys } from '../store/client-keys.ts';
import { openStore } from '../store/db.ts';
import { parsePositiveInt, UsageError, type Command } from './command.ts';
import { dataDirOption, dataDirUsage } from './peer-client.ts';

const DAY_S = 24 * 3600;

export const clientKeyCommand: Command = {
  name: 'client-key',
  summary: 'mint a key for a named client to start episodes on this peer (/swarm/v1); --revoke ends its old keys',
  usage: `agentjet client-key NAME [options]

Options:
  --ttl-days N   how long the key is valid (default ${DEFAULT_CLIENT_KEY_TTL_S / DAY_S}, at most ${MAX_CLIENT_KEY_TTL_S / DAY_S})
  --revoke       revoke every key of NAME minted so far, then print a new one
${dataDirUsage}`,
  options: { ...dataDirOption, 'ttl-days': { type: 'string' }, revoke: { type: 'boolean' } },
  positionals: { min: 1, max: 1, names: 'the client name' },
  async run(values, [name]) {
    const ttlDays = parsePositiveInt('--ttl-days', values['ttl-days'] as string | undefined, DEFAULT_CLIENT_KEY_TTL_S / DAY_S);
    if (ttlDays * DAY_S > MAX_CLIENT_KEY_TTL_S) throw new UsageError(`--ttl-days must be at most ${MAX_CLIENT_KEY_TTL_S / DAY_S}`);
    const dataDir = values['data-dir'] ? resolve(values['data-dir'] as string) : defaultDataDir();
    mkdirSync(dataDir, { recursive: true });
    const paths = dataPaths(dataDir);
    const identity = loadOrCreateIdentity(paths.identity);
    const db = openStore(paths.store);
    try {
      // Checked before anything is revoked: a name that cannot be in a key changes nothing.
      mintClientKey(identity.secret, name);
      const generation = values.revoke ? revokeClientKeys(db, name) : clientKeyGeneration(db, name);
      if (values.revoke) process.stderr.write(`revoked every earlier key of client "${name}"\n`);
      process.stdout.write(mintClientKey(identity.secret, name, { generation, ttlS: ttlDays * DAY_S }) + '\n');
    } catch (err) {
      if (err instanceof TypeError) throw new UsageError(err.message);
      throw err;
    } finally {
      db.close();
    }
    return 0;
  },
};
