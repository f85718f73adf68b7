/**
 * What a bubblewrap sandbox mounts (sandbox.ts): the system's read-only parts, the interpreter's own files, and the
 * work dir handed to the run's uid. Paths and links only: no policy here.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, lstatSync, readdirSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pythonExecutable } from './script.ts';

/** The system's read-only parts a script's interpreter needs: programs, libraries, their data. */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/**
 * What of /etc a script gets: name resolution, TLS roots, the dynamic linker's cache, time zone, the
 * alternatives links programs go through. Not the rest (the peer's machine configuration, shadow files).
 */
export const ETC_ENTRIES = [
  'resolv.conf', 'hosts', 'host.conf', 'nsswitch.conf', 'gai.conf', 'services', 'protocols', 'ssl', 'ca-certificates',
  'ca-certificates.conf', 'pki', 'crypto-policies', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime',
  'timezone', 'alternatives', 'mime.types', 'passwd', 'group',
];

let prefixes: string[] | undefined;
/** Where the Python interpreter's own files are (its prefix, a venv's base): read-only in the sandbox. */
export function pythonPrefixes(): string[] {
  prefixes ??= JSON.parse(
    execFileSync(pythonExecutable(), ['-c', 'import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]))'], { encoding: 'utf8' }),
  ) as string[];
  return [dirname(pythonExecutable()), ...prefixes];
}

/** The work dir (created just now, holding home/ and tmp/) made the sandbox uid's, so the script can write it. */
export function chownTree(dir: string, uid: number) {
  chownSync(dir, uid, uid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) chownTree(path, uid);
    else chownSync(path, uid, uid);
  }
}

/** The system dirs read-only, as they are: merged-/usr links stay links. */
export function systemMounts(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let link: string | undefined;
    try {
      link = lstatSync(dir).isSymbolicLink() ? readlinkSync(dir) : undefined;
    } catch {
      continue;
    }
    if (link !== undefined) args.push('--symlink', link, dir);
    else args.push('--ro-bind', dir, dir);
  }
  args.push('--perms', '0755', '--dir', '/etc');
  for (const entry of ETC_ENTRIES) args.push('--ro-bind-try', join('/etc', entry), join('/etc', entry));
  return args;
}

/** Read-only mounts at the same paths (and at their real paths, where a link leads elsewhere); outermost first. */
export function readOnly(paths: string[]): string[] {
  const unique = new Set<string>();
  for (const path of paths) {
    if (!existsSync(path)) continue;
    unique.add(path);
    unique.add(realpathSync(path));
  }
  const covered = (path: string) => SYSTEM_DIRS.some((d) => path === d || path.startsWith(`${d}/`));
  const sorted = [...unique].filter((p) => !covered(p)).sort((a, b) => a.length - b.length);
  const kept = sorted.filter((p, i) => !sorted.slice(0, i).some((q) => p.startsWith(`${q}/`)));
  return [...parents(kept), ...kept.flatMap((p) => ['--ro-bind', p, p])];
}

/**
 * The folders leading to mount points, made traversable: bubblewrap creates missing ones mode 0700, which a
 * sandbox uid other than the peer's could not pass. They are empty folders in the sandbox's own root.
 */
export function parents(paths: string[]): string[] {
  const dirs = new Set<string>();
  for (const path of paths) for (let dir = dirname(path); dir !== dirname(dir); dir = dirname(dir)) if (dir !== '/tmp') dirs.add(dir);
  return [...dirs].sort((a, b) => a.length - b.length).flatMap((d) => ['--perms', '0755', '--dir', d]);
}
