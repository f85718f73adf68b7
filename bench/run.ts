/**
 * `npm run bench -- NAME [--json] [args…]`: runs bench/NAME.ts, whose default export takes a BenchContext and
 * returns the result object. The table goes to stdout; with --json the result is also printed as the last line.
 */
import '../p2p/polyfill.ts';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from './report.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && !['run.ts', 'report.ts'].includes(f) && !f.endsWith('.test.ts'))
  .map((f) => f.slice(0, -3));

const argv = process.argv.slice(2);
const name = argv.find((a) => !a.startsWith('-'));
if (!name || !available.includes(name)) {
  process.stderr.write(`usage: npm run bench -- NAME [--json]\navailable: ${available.join(', ')}\n`);
  process.exit(2);
}
const ctx: BenchContext = {
  json: argv.includes('--json'),
  args: argv.filter((a) => a !== name && a !== '--json'),
  log: (line) => process.stderr.write(line + '\n'),
};
const mod = (await import(`./${name}.ts`)) as { default: (ctx: BenchContext) => Promise<Record<string, unknown>> };
const result = await mod.default(ctx);
if (ctx.json) process.stdout.write(JSON.stringify(result) + '\n');
process.exit(0);
