/**
 * The node's identity: an Ed25519 private key kept in the data dir, so that a peer keeps its peer id across
 * restarts. The file is readable by its owner only (0600); it is the peer's signing key for manifests.
 */
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { chmod, mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidIdentityFileError } from './errors.ts';

export const IDENTITY_FILE = 'peer-key';

export async function loadOrCreatePrivateKey(dataDir: string): Promise<PrivateKey> {
  const path = join(dataDir, IDENTITY_FILE);
  let bytes: Buffer | undefined;
  try {
    bytes = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (bytes) {
    try {
      return privateKeyFromProtobuf(bytes);
    } catch {
      throw new InvalidIdentityFileError(`${path} is not a libp2p private key`);
    }
  }
  await mkdir(dataDir, { recursive: true });
  const key = await generateKeyPair('Ed25519');
  // Write to a temp file first so that a crash never leaves a half-written identity behind.
  const temp = `${path}.${process.pid}.tmp`;
  const handle = await open(temp, 'w', 0o600);
  try {
    await handle.writeFile(privateKeyToProtobuf(key));
    await handle.sync();
  } finally {
    await handle.close();
  }
  await chmod(temp, 0o600);
  await rename(temp, path);
  return key;
}
