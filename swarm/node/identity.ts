/**
 * The node's persisted identity: a stable id shown everywhere and a secret that signs episode keys.
 * Created on first start, kept with mode 0600, reused across restarts.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { z } from 'zod';

const identitySchema = z.object({
  nodeId: z.string().regex(/^[0-9a-f]{16}$/),
  secret: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: z.string(),
});
export type NodeIdentity = z.infer<typeof identitySchema>;

export class IdentityFileError extends Error {
  override name = 'IdentityFileError';
}

export function loadOrCreateIdentity(path: string): NodeIdentity {
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
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(identity, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
  return identity;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
