/**
 * The `agentjet` CLI: parses the command line, runs one command, returns the exit code
 * (0 ok, 1 failed, 2 wrong usage).
 */
import { APP_VERSION } from '../version.ts';
import { UsageError, type Command } from './command.ts';
import { parseCommandLine } from './command-line.ts';
import { closestName } from '../../common/closest-name.ts';
import { describeFailure, formatFailure } from './error-output.ts';
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
import { researchCommand } from './research-command.ts';

export const commands: Command[] = [nodeCommand, serveCommand, statusCommand, episodesCommand, runsCommand, checkpointsCommand, clientKeyCommand, attachCommand, clientsCommand, demoCommand, swarmCommand, peersCommand, researchCommand];

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
    if (command) process.stdout.write(command.usage + '\n');
    else if (rest.length === 0) process.stdout.write(overview());
    else {
      process.stderr.write(`agentjet help: unknown command "${rest[0]}"${commandGuess(rest[0])}\n\n${overview()}`);
      return 2;
    }
    return 0;
  }
  const command = commands.find((c) => c.name === first);
  if (!command) {
    process.stderr.write(`agentjet: unknown command "${first}"${commandGuess(first)}\n\n${overview()}`);
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
    // `--json` asks for machine-readable output: the failure too (the name and message, as one object).
    process.stderr.write(formatFailure(command.name, describeFailure(err), rest.includes('--json')));
    return 1;
  }
}

/** "; did you mean attach?" for a mistyped command, else "". */
function commandGuess(typed: string): string {
  const guess = closestName(typed, commands.map((c) => c.name));
  return guess ? `; did you mean ${guess}?` : '';
}
