/**
 * The node's persisted identity: a stable id shown everywhere and a secret that signs episode keys.
 * Created on first start, kept with mode 0600, reused across restarts.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { z } from 'zod';
import { cleanStaleTempFiles, writeFileAtomic } from './atomic-file.ts';

const identitySchema = z.object({
  nodeId: z.string().regex(/^[0-9a-f]{16}$/),
  secret: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: z.string(),
});
export type NodeIdentity = z.infer<typeof identitySchema>;

export class IdentityFileError extends Error {
  override name = 'IdentityFileError';
}

/** Throws DiskFullError (atomic-file.ts) when it cannot be created for lack of space; nothing is left behind. */
export function loadOrCreateIdentity(path: string): NodeIdentity {
  // A start killed while writing it left its temp file; it would sit in the data directory for ever.
  cleanStaleTempFiles(dirname(path), [basename(path)]);
  let text: string | undefined;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    const parsed = identitySchema.safeParse(safeJson(text));
    if (!parsed.success) {
      throw new IdentityFileError(`${path} is not a valid identity file; move it away to create a new identity`);
    }
    return parsed.data;
  }
  const identity: NodeIdentity = {
    nodeId: randomBytes(8).toString('hex'),
    secret: randomBytes(32).toString('hex'),
    createdAt: new Date().toISOString(),
  };
  writeFileAtomic(path, JSON.stringify(identity, null, 2) + '\n', { mode: 0o600 });
  return identity;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
