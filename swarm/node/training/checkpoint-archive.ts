/**
 * A checkpoint folder as a tar archive (POSIX ustar), streamed file by file so that a checkpoint of several
 * gigabytes is never held in memory. Sizes past ustar's 8 GiB octal limit use the base-256 form that GNU and BSD
 * tar read. The archive holds one top folder named after the model and step, as `tar -xf` users expect.
 */
import { createReadStream, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const BLOCK = 512;

export interface ArchiveEntry {
  /** Path inside the archive ('/'-separated). */
  name: string;
  path: string;
  size: number;
  mtimeS: number;
}

/** The regular files under `folder`, sorted, named `<top>/<path relative to folder>`. */
export function archiveEntries(folder: string, top: string): ArchiveEntry[] {
  const files: ArchiveEntry[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const stat = statSync(path);
      if (stat.isDirectory()) walk(path);
      else if (stat.isFile()) {
        const inside = relative(folder, path).split(sep).join('/');
        files.push({ name: `${top}/${inside}`, path, size: stat.size, mtimeS: Math.floor(stat.mtimeMs / 1000) });
      }
    }
  };
  walk(folder);
  return files;
}

/** The archive's bytes: for each entry a header, its content and padding to a block; then two empty blocks. */
export async function* tarArchive(entries: readonly ArchiveEntry[]): AsyncGenerator<Buffer> {
  for (const entry of entries) {
    yield tarHeader(entry);
    let written = 0;
    for await (const chunk of createReadStream(entry.path)) {
      const bytes = chunk as Buffer;
      written += bytes.length;
      yield bytes;
    }
    // The file changed under us: the header promised `size` bytes, so a short read would corrupt the archive.
    if (written !== entry.size) throw new Error(`${entry.path} changed while it was archived`);
    const padding = (BLOCK - (entry.size % BLOCK)) % BLOCK;
    if (padding > 0) yield Buffer.alloc(padding);
  }
  yield Buffer.alloc(2 * BLOCK);
}

/** Total archive size, for Content-Length. */
export function tarSize(entries: readonly ArchiveEntry[]): number {
  return entries.reduce((sum, e) => sum + BLOCK + Math.ceil(e.size / BLOCK) * BLOCK, 2 * BLOCK);
}

function tarHeader(entry: ArchiveEntry): Buffer {
  const header = Buffer.alloc(BLOCK);
  const name = Buffer.from(entry.name);
  if (name.length <= 100) name.copy(header, 0);
  else {
    // ustar splits long names at a '/' into prefix (155 bytes) and name (100 bytes).
    const cut = entry.name.lastIndexOf('/', 155);
    const prefix = Buffer.from(entry.name.slice(0, cut));
    const rest = Buffer.from(entry.name.slice(cut + 1));
    if (cut <= 0 || prefix.length > 155 || rest.length > 100) throw new Error(`path too long for tar: ${entry.name}`);
    rest.copy(header, 0);
    prefix.copy(header, 345);
  }
  octal(header, 100, 8, 0o644);
  octal(header, 108, 8, 0);
  octal(header, 116, 8, 0);
  writeSize(header, entry.size);
  octal(header, 136, 12, entry.mtimeS);
  header.fill(0x20, 148, 156); // checksum field counts as spaces while summing
  header.write('0', 156); // regular file
  header.write('ustar\0', 257);
  header.write('00', 263);
  const checksum = header.reduce((sum, byte) => sum + byte, 0);
  header.write(checksum.toString(8).padStart(6, '0') + '\0 ', 148);
  return header;
}

function octal(header: Buffer, offset: number, width: number, value: number): void {
  header.write(value.toString(8).padStart(width - 1, '0') + '\0', offset);
}

function writeSize(header: Buffer, size: number): void {
  if (size < 8 ** 11) return octal(header, 124, 12, size);
  // Base-256: high bit of the first byte set, the value big-endian in the remaining bytes.
  let value = BigInt(size);
  for (let i = 135; i > 124; i--) {
    header[i] = Number(value & 0xffn);
    value >>= 8n;
  }
  header[124] = 0x80;
}
