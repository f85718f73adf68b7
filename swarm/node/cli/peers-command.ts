/** `agentjet peers`: the live swarm as the running peer sees it (GET /api/peers). */
import type { SwarmPeer } from '../../common/api.ts';
import type { Command } from './command.ts';
import { dataDirOption, dataDirUsage, PeerClient, PeerRequestError } from './peer-client.ts';

interface PeersAnswer {
  swarm: string;
  peerId: string;
  addresses: string[];
  peers: SwarmPeer[];
}

export const peersCommand: Command = {
  name: 'peers',
  summary: 'list the peers of the swarm: roles, models and policy versions, load',
  usage: `agentjet peers [--json]

Options:
${dataDirUsage}
  --json            print JSON`,
  options: { ...dataDirOption, json: { type: 'boolean' } },
  async run(values) {
    const client = PeerClient.fromDataDir(values);
    let answer: PeersAnswer;
    try {
      answer = await client.get<PeersAnswer>('/peers');
    } catch (err) {
      if (err instanceof PeerRequestError && err.status === 404) {
        process.stderr.write(
          'agentjet peers: this peer is in no swarm; run agentjet swarm create (or join TOKEN) and restart it\n',
        );
        return 1;
      }
      throw err;
    }
    if (values.json) {
      process.stdout.write(JSON.stringify(answer, null, 2) + '\n');
      return 0;
    }
    const lines = answer.peers.map((peer) => {
      const models = peer.models.map((m) => `${m.name}@v${m.policyVersion}`).join(', ') || '-';
      const who = peer.self
        ? `${peer.peerId} (this peer)`
        : `${peer.peerId}${peer.connected ? '' : ' (not connected)'}`;
      return `${who}\n  roles: ${peer.roles.join(', ') || '-'}   models: ${models}   load: ${peer.pool.load}/${peer.pool.capacity}   scripts: ${peer.clientScripts.length}`;
    });
    process.stdout.write(`swarm "${answer.swarm}" — ${answer.peers.length} peer(s)\n${lines.join('\n')}\n`);
    return 0;
  },
};
