/**
 * The `agentjet` CLI: parses the command line, runs one command, returns the exit code
 * (0 ok, 1 failed, 2 wrong usage).
 */
import { parseArgs } from 'node:util';
import { APP_VERSION } from '../version.ts';
import { UsageError, type Command } from './command.ts';
import { clientKeyCommand } from './client-key-command.ts';
import { checkpointsCommand } from './checkpoints-command.ts';
import { episodesCommand } from './episodes-command.ts';
import { runsCommand } from './runs-command.ts';
import { nodeCommand, serveCommand } from './node-command.ts';
import { statusCommand } from './status-command.ts';
import { attachCommand } from './attach-command.ts';
import { clientsCommand } from './clients-command.ts';
import { demoCommand } from '../demo/demo-command.ts';
import { swarmCommand } from './swarm-command.ts';
import { peersCommand } from './peers-command.ts';

export const commands: Command[] = [nodeCommand, serveCommand, statusCommand, episodesCommand, runsCommand, checkpointsCommand, clientKeyCommand, attachCommand, clientsCommand, demoCommand, swarmCommand, peersCommand];

function overview(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return `AgentJet ${APP_VERSION} — train the LLMs behind agents with RL on a swarm of lab machines

Usage: agentjet <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

  agentjet help <command>   details of one command
  agentjet --version        print the version
`;
}

export async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h') {
    process.stdout.write(overview());
    return first === undefined ? 2 : 0;
  }
  if (first === '--version' || first === '-v') {
    process.stdout.write(APP_VERSION + '\n');
    return 0;
  }
  if (first === 'help') {
    const command = commands.find((c) => c.name === rest[0]);
    process.stdout.write(command ? command.usage + '\n' : overview());
    return command || rest.length === 0 ? 0 : 2;
  }
  const command = commands.find((c) => c.name === first);
  if (!command) {
    process.stderr.write(`agentjet: unknown command "${first}"\n\n${overview()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  try {
    const { values, positionals } = parseCommandLine(command, rest);
    return await command.run(values, positionals);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`agentjet ${command.name}: ${err.message}\n\nUsage: ${command.usage}\n`);
      return 2;
    }
    process.stderr.write(`agentjet ${command.name}: ${(err as Error).name}: ${(err as Error).message}\n`);
    return 1;
  }
}

function parseCommandLine(command: Command, args: string[]) {
  let parsed;
  try {
    parsed = parseArgs({ args, options: command.options, strict: true, allowPositionals: true });
  } catch (err) {
    // parseArgs explains unknown flags and missing values well; keep its words.
    throw new UsageError((err as Error).message);
  }
  const { min, max, names } = command.positionals ?? { min: 0, max: 0, names: '' };
  if (parsed.positionals.length < min) throw new UsageError(`missing ${names}`);
  if (parsed.positionals.length > max) {
    throw new UsageError(`unexpected argument "${parsed.positionals[max]}"`);
  }
  return { values: parsed.values as Record<string, string | boolean | string[] | boolean[] | undefined>, positionals: parsed.positionals };
}
