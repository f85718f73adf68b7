/**
 * The CLI commands the empty states suggest, in one place so they stay in step with the CLI
 * (swarm/node/cli, `agentjet help <command>`). Each makes the matching view fill up.
 */
export const COMMANDS = {
  startPeer: 'agentjet node',
  serveModel: 'agentjet serve --model builtin:tiny',
  attachClient: 'agentjet attach examples/calculator/agent.ts --tasks examples/calculator/tasks.jsonl --model tiny',
  listClients: 'agentjet clients list',
  listEpisodes: 'agentjet episodes list --limit 20',
  createSwarm: 'agentjet swarm create',
  joinSwarm: 'agentjet swarm join <token>',
} as const;
