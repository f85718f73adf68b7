/**
 * `agentjet swarm create [--name N]` and `agentjet swarm join TOKEN`: make a private swarm (a name and a fresh
 * pre-shared key, in one token) or join one. Either stores the token in the data dir, so the next start of the
 * peer joins the swarm; nothing else turns p2p on.
 */
import { resolve } from 'node:path';
import { createSwarmToken } from '../../../p2p/swarm-token/token.ts';
import { dataPaths, defaultDataDir } from '../paths.ts';
import { storeSwarmToken, swarmFile } from '../p2p/settings.ts';
import { UsageError, type Command } from './command.ts';
import { dataDirOption, dataDirUsage } from './peer-client.ts';

const DEFAULT_SWARM_NAME = 'lab';

export const swarmCommand: Command = {
  name: 'swarm',
  summary: 'create a private swarm (prints its join token) or join one with a token',
  usage: `agentjet swarm create [--name N] [--bootstrap ADDR …] | join TOKEN

  create        a new swarm with a fresh key; prints the token to give the other lab machines
  join TOKEN    store the token: this peer joins that swarm at its next start

Options:
  --name N          the swarm's name (create; default ${DEFAULT_SWARM_NAME})
  --bootstrap ADDR  a multiaddr with /p2p/<id> put into the token, for machines mDNS cannot see (repeatable)
${dataDirUsage}
  --json            print JSON`,
  options: {
    ...dataDirOption,
    name: { type: 'string' },
    bootstrap: { type: 'string', multiple: true },
    json: { type: 'boolean' },
  },
  positionals: { min: 1, max: 2, names: 'a subcommand: create or join TOKEN' },
  async run(values, [sub, token]) {
    const dataDir = values['data-dir'] ? resolve(values['data-dir'] as string) : defaultDataDir();
    const p2pDir = dataPaths(dataDir).p2p;
    if (sub === 'create') {
      if (token !== undefined) throw new UsageError(`create takes no argument, got "${token}"`);
      const created = createSwarmToken({
        name: (values.name as string | undefined) ?? DEFAULT_SWARM_NAME,
        bootstrap: (values.bootstrap as string[] | undefined) ?? [],
      });
      const swarm = storeSwarmToken(p2pDir, created);
      const json = { token: created, swarm: swarm.name, stored: swarmFile(p2pDir) };
      process.stdout.write(
        values.json
          ? JSON.stringify(json) + '\n'
          : `${created}\n\nSwarm "${swarm.name}" created; this peer joins it at its next start.\nOn the other machines: agentjet swarm join <the token above>\n`,
      );
      return 0;
    }
    if (sub === 'join') {
      if (!token) throw new UsageError('join needs the token printed by agentjet swarm create');
      if (values.name !== undefined || values.bootstrap !== undefined)
        throw new UsageError('--name and --bootstrap belong to create');
      const swarm = storeSwarmToken(p2pDir, token);
      const json = { swarm: swarm.name, bootstrap: swarm.bootstrap, stored: swarmFile(p2pDir) };
      process.stdout.write(
        values.json
          ? JSON.stringify(json) + '\n'
          : `Joined swarm "${swarm.name}"; restart the peer (agentjet serve / node) to connect.\n`,
      );
      return 0;
    }
    throw new UsageError(`unknown subcommand "${sub}"; use create or join TOKEN`);
  },
};
