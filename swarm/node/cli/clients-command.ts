/** `agentjet clients list | pause NAME | resume NAME | detach NAME | runs NAME | key NAME`: the running peer's attached scripts. */
import type { ClientRunRecord, ClientStatus } from '../../common/runner-api.ts';
import { UsageError, type Command } from './command.ts';
import { dataDirOption, dataDirUsage, PeerClient } from './peer-client.ts';

const SUBCOMMANDS = ['list', 'pause', 'resume', 'detach', 'runs', 'key'];

export const clientsCommand: Command = {
  name: 'clients',
  summary: 'list, pause, resume and detach attached agent scripts',
  usage: `agentjet clients list | pause NAME | resume NAME | detach NAME [--abort] | runs NAME | key NAME

  list          every attached script: state (and why paused), version, episodes, mean reward
  pause NAME    start no new episodes (running ones finish)
  resume NAME   start again (also after the circuit breaker paused it)
  detach NAME   remove it; --abort also aborts its running episodes
  runs NAME     its recent runs: outcome, reason, script hash
  key NAME      a client key and swarm URL for a long-running SDK client of that name

Options:
${dataDirUsage}
  --abort           detach: abort running episodes
  --json            print JSON`,
  options: { ...dataDirOption, abort: { type: 'boolean' }, json: { type: 'boolean' } },
  positionals: { min: 1, max: 2, names: `a subcommand: ${SUBCOMMANDS.join(', ')}` },
  async run(values, [sub, name]) {
    if (!SUBCOMMANDS.includes(sub)) throw new UsageError(`unknown subcommand "${sub}"; use ${SUBCOMMANDS.join(', ')}`);
    if (sub === 'list' && name !== undefined) throw new UsageError(`list takes no argument, got "${name}"`);
    if (sub !== 'list' && !name) throw new UsageError(`${sub} needs a client name`);
    const client = PeerClient.fromDataDir(values);
    const path = `/clients/${encodeURIComponent(name ?? '')}`;
    const print = (value: unknown, text: () => string) => process.stdout.write((values.json ? JSON.stringify(value, null, 2) : text()) + '\n');
    switch (sub) {
      case 'list': {
        const { clients } = await client.request<{ clients: ClientStatus[] }>('GET', '/clients');
        print({ clients }, () => (clients.length === 0 ? 'no scripts attached' : clients.map(describe).join('\n')));
        return 0;
      }
      case 'pause':
      case 'resume': {
        const status = await client.request<ClientStatus>('POST', `${path}/${sub}`);
        print(status, () => describe(status));
        return 0;
      }
      case 'detach': {
        const answer = await client.request<unknown>('DELETE', `${path}${values.abort ? '?abort=1' : ''}`);
        print(answer, () => `detached ${name}`);
        return 0;
      }
      case 'runs': {
        const { runs } = await client.request<{ runs: ClientRunRecord[] }>('GET', `${path}/runs`);
        print({ runs }, () =>
          runs.map((r) => [r.endedAt, r.taskId, r.kind, r.status, r.reward ?? '-', r.scriptHash.slice(0, 12), r.reason ?? ''].join('  ')).join('\n') || 'no runs yet',
        );
        return 0;
      }
      default: {
        const key = await client.request<{ name: string; key: string; swarmUrl: string }>('POST', `${path}/key`);
        print(key, () => `AGENTJET_SWARM_URL=${key.swarmUrl}\nAGENTJET_CLIENT_KEY=${key.key}`);
        return 0;
      }
    }
  },
};

function describe(c: ClientStatus): string {
  const mean = c.meanReward === null ? '-' : c.meanReward.toFixed(3);
  const why = c.reason ? ` (${c.reason})` : '';
  return `${c.name}  ${c.state}${why}  v${c.version} ${c.scriptHash.slice(0, 12)}  episodes ${c.counts.ended} ended / ${c.counts.aborted} aborted / ${c.inFlight} running  mean reward ${mean}`;
}
