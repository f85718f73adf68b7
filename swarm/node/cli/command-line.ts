/**
 * A command's arguments through node:util parseArgs, with what parseArgs does not do for a user: the nearest
 * known flag for an unknown one ("did you mean --repeat?"), and a negative number taken as a flag's value
 * (`--concurrency -1` reaches the command, whose own check then says what is allowed).
 */
import { parseArgs } from 'node:util';
import { closestName } from '../../common/closest-name.ts';
import { UsageError, type Command, type OptionSpec, type OptionValues } from './command.ts';

/** A token that is a negative number, not a flag (no flag starts with a digit). */
const NEGATIVE_NUMBER = /^-\d/;

export function parseCommandLine(command: Command, args: string[]): { values: OptionValues; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args: joinNegativeValues(command.options, args), options: command.options, strict: true, allowPositionals: true });
  } catch (err) {
    // parseArgs explains unknown flags and missing values well; keep its words and add the likely flag.
    throw new UsageError((err as Error).message + didYouMean(command.options, args));
  }
  const { min, max, names } = command.positionals ?? { min: 0, max: 0, names: '' };
  if (parsed.positionals.length < min) throw new UsageError(`missing ${names}`);
  if (parsed.positionals.length > max) {
    throw new UsageError(`unexpected argument "${parsed.positionals[max]}"`);
  }
  return { values: parsed.values as OptionValues, positionals: parsed.positionals };
}

/** `--flag -1` → `--flag=-1` for string options, so parseArgs does not read "-1" as the short flag "-1". */
export function joinNegativeValues(options: OptionSpec, args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const next = args[i + 1];
    if (arg === '--') return [...out, ...args.slice(i)];
    const option = arg.startsWith('--') && !arg.includes('=') ? options[arg.slice(2)] : undefined;
    if (option?.type === 'string' && next !== undefined && NEGATIVE_NUMBER.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** "; did you mean --repeat?" for the first unknown long flag near a known one, else "". */
export function didYouMean(options: OptionSpec, args: string[]): string {
  const known = Object.keys(options);
  for (const arg of args) {
    if (arg === '--') break;
    if (!arg.startsWith('--')) continue;
    const flag = arg.slice(2).split('=')[0];
    if (known.includes(flag)) continue;
    const guess = closestName(flag, known);
    if (guess) return `; did you mean --${guess}?`;
  }
  return '';
}
