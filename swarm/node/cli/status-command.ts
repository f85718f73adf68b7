/** `agentjet status`: what the running peer on this machine is doing (models, engines, episodes, store). */
import type { StatusPayload } from '../../common/api.ts';
import type { Command } from './command.ts';
import { dataDirOption, dataDirUsage, PeerClient } from './peer-client.ts';

export const statusCommand: Command = {
  name: 'status',
  summary: 'show the running peer: hosted models, engine states, pools, policy versions',
  usage: `agentjet status [options]

Options:
${dataDirUsage}
  --json            print the status as JSON`,
  options: { ...dataDirOption, json: { type: 'boolean' } },
  async run(values) {
    const status = await PeerClient.fromDataDir(values).get<StatusPayload>('/status');
    if (values.json) {
      process.stdout.write(JSON.stringify(status, null, 2) + '\n');
      return 0;
    }
    const lines = [
      `AgentJet ${status.version} peer ${status.nodeId} — up ${status.uptimeS} s, roles ${status.roles.join(', ')}`,
      `  gateway: ${status.urls.gateway}`,
      `  backend: ${status.backend ? `${status.backend.name} (${status.backend.reason})` : 'none yet'}`,
      `  store:   ${status.store.path} (schema ${status.store.schemaVersion}, ${status.store.episodes} episodes)`,
      status.models.length ? '  models:' : '  models:  none (start with `agentjet serve --model builtin:tiny`)',
      ...status.models.map(
        (m) =>
          `    ${m.name.padEnd(16)} ${m.engineState.padEnd(9)} policy v${m.policyVersion}  step ${m.step}  pool ${m.pool.active}/${m.pool.limit}  ${m.source}${m.error ? `  error: ${m.error}` : ''}`,
      ),
    ];
    process.stdout.write(lines.join('\n') + '\n');
    return 0;
  },
};
