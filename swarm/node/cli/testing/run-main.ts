/**
 * Test helper: runs the CLI's `main` in this process (no child process: fast) and captures what it writes to
 * stdout and stderr.
 */
import { vi } from 'vitest';
import { main } from '../main.ts';

export interface MainResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runMain(argv: string[]): Promise<MainResult> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    const code = await main(argv);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/** The error name a failed command printed on its `error: NAME` line (undefined when none). */
export function errorName(result: MainResult): string | undefined {
  return /^error: (\S+)$/m.exec(result.stderr)?.[1];
}
