// A hostile agent (Node): tries one attack on the peer (the task's "attack") and reports what it managed, as
// {"attack", "managed", "evidence"}, then a result line. Signals are SIGCONT (harmless, but delivered), writes are
// marker files. The runner's side (index.ts) judges each attack by what it can observe itself.
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, linkSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const task = JSON.parse(process.env.AGENTJET_TASK);
const control = join(task.dataDir, 'control.json');
const identity = join(task.dataDir, 'identity.json');

const report = (managed, evidence) => console.log(JSON.stringify({ attack: task.attack, managed, evidence: String(evidence).slice(0, 4000) }));

function procSibling() {
  const pids = [String(task.siblingPid), ...readdirSync('/proc').filter((p) => /^\d+$/.test(p))];
  for (const pid of pids) {
    if (pid === String(process.pid)) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (env.includes('SIBLING_KEY=') || env.includes('OPENAI_API_KEY=')) return env.replaceAll('\0', ' ');
    } catch {
      // Not readable: next.
    }
  }
  throw new Error("no other process's environment readable");
}

function signalPeer() {
  const hit = [];
  for (const pid of new Set([task.peerPid, process.ppid])) {
    try {
      process.kill(pid, 'SIGCONT');
      hit.push(pid);
    } catch {
      // Not ours to signal.
    }
  }
  if (!hit.includes(task.peerPid)) throw new Error(`could not signal the peer (pid ${task.peerPid}); signalled ${hit}`);
  return `SIGCONT delivered to ${hit}`;
}

function writeOutside() {
  const written = [];
  for (const path of [join(task.outside, 'js-pwned'), join(task.dataDir, 'js-pwned')]) {
    try {
      writeFileSync(path, 'pwned');
      written.push(path);
    } catch {
      // Refused: next.
    }
  }
  if (written.length === 0) throw new Error('no write outside the work dir');
  return written;
}

function hardLink() {
  const link = join(process.cwd(), 'control-link.json');
  linkSync(control, link);
  return readFileSync(link, 'utf8');
}

function memory() {
  // One buffer past the limit, touched so that it is really there.
  const block = Buffer.alloc((task.memoryMb + 256) * 1024 * 1024, 1);
  return `allocated ${block.length >> 20} MiB`;
}

function setsidGrandchild() {
  // detached: the grandchild calls setsid, leaving the process group, and keeps stdout and stderr open.
  const child = spawn(process.execPath, ['-e', `setTimeout(() => {}, ${task.holdS * 1000})`], { detached: true, stdio: ['ignore', 'inherit', 'inherit'] });
  child.unref();
  return `grandchild ${child.pid} detached, holding the output pipes for ${task.holdS} s`;
}

const attacks = {
  'read-control': () => readFileSync(control, 'utf8'),
  'read-identity': () => readFileSync(identity, 'utf8'),
  'proc-sibling': procSibling,
  'signal-peer': signalPeer,
  'write-outside': writeOutside,
  'rewrite-snapshot': () => {
    appendFileSync(fileURLToPath(import.meta.url), '\n// rewritten by the agent\n');
    return 'appended to the snapshot';
  },
  'subprocess-cat': () => execFileSync('cat', [control], { encoding: 'utf8' }),
  'hard-link': hardLink,
  memory,
  'setsid-grandchild': setsidGrandchild,
};

try {
  report(true, attacks[task.attack]());
} catch (err) {
  report(false, `${err.code ?? err.name}: ${err.message}`);
}
console.log(JSON.stringify({ reward: 0 }));
