"""A hostile agent: tries one attack on the peer (the task's "attack") and reports what it managed.

Prints {"attack": name, "managed": bool, "evidence": text} (what it read, what it did), then a result line. It
never harms the host beyond the attack itself: signals are SIGCONT (harmless, but delivered), writes are marker
files, the fork bomb is bounded. The runner's side (index.ts) judges each attack by what it can observe itself.
"""
import ctypes
import ctypes.util
import gc
import json
import os
import signal
import subprocess
import sys
import time

task = json.loads(os.environ["AGENTJET_TASK"])
attack = task["attack"]
data_dir = task["dataDir"]
control = os.path.join(data_dir, "control.json")
identity = os.path.join(data_dir, "identity.json")


def report(managed, evidence):
    print(json.dumps({"attack": attack, "managed": bool(managed), "evidence": str(evidence)[:4000]}), flush=True)


def read(path):
    with open(path) as f:
        return f.read()


def attempt(fn):
    try:
        evidence = fn()
        report(True, evidence)
    except BaseException as e:  # MemoryError, OSError, PermissionError from the guard …
        report(False, "%s: %s" % (type(e).__name__, e))


def proc_sibling():
    # The sibling's pid if it is visible, else every /proc entry that is not ours.
    found = []
    pids = [str(task["siblingPid"])] + [p for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        if pid == str(os.getpid()):
            continue
        env = None
        try:
            env = open("/proc/%s/environ" % pid, "rb").read().decode(errors="replace")
        except OSError:
            # The same through a directory fd: the path an audit hook sees is then relative.
            try:
                proc = os.open("/proc", os.O_RDONLY)
                fd = os.open("%s/environ" % pid, os.O_RDONLY, dir_fd=proc)
                env = os.read(fd, 65536).decode(errors="replace")
            except OSError:
                continue
        if "SIBLING_KEY=" in env or "OPENAI_API_KEY=" in env:
            found.append(env.replace("\0", " "))
            break
    if not found:
        raise PermissionError("no other process's environment readable")
    return found[0]


def signal_peer():
    hit = []
    for pid in {task["peerPid"], os.getppid()}:
        try:
            os.kill(pid, signal.SIGCONT)
            hit.append(pid)
        except OSError:
            pass
    if task["peerPid"] not in hit:
        raise PermissionError("could not signal the peer (pid %d); signalled %s" % (task["peerPid"], hit))
    return "SIGCONT delivered to %s" % hit


def write_outside():
    written = []
    for path in (os.path.join(task["outside"], "py-pwned"), os.path.join(data_dir, "py-pwned")):
        try:
            with open(path, "w") as f:
                f.write("pwned")
            written.append(path)
        except OSError:
            pass
    if not written:
        raise PermissionError("no write outside the work dir")
    return written


def rewrite_snapshot():
    with open(os.path.abspath(sys.argv[0]), "a") as f:
        f.write("\n# rewritten by the agent\n")
    return "appended to " + sys.argv[0]


def subprocess_cat():
    out = subprocess.run(["cat", control], capture_output=True, text=True, timeout=10)
    if out.returncode != 0:
        raise PermissionError(out.stderr.strip())
    return out.stdout


def dir_fd():
    # Relative to a directory fd of the data dir's parent: the path an audit hook sees resolves elsewhere.
    fd = os.open(os.path.dirname(data_dir), os.O_RDONLY)
    inner = os.open(os.path.join(os.path.basename(data_dir), "control.json"), os.O_RDONLY, dir_fd=fd)
    return os.read(inner, 4096).decode()


def ctypes_open():
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = libc.open(control.encode(), os.O_RDONLY)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open failed")
    return os.read(fd, 4096).decode()


def hard_link():
    link = os.path.join(os.getcwd(), "control-link.json")
    os.link(control, link)
    return read(link)


def gc_deny_list():
    # The guard keeps its deny list in a plain list: find it among the interpreter's objects and empty it.
    for obj in gc.get_objects():
        if isinstance(obj, list) and obj and all(isinstance(x, str) for x in obj) and any(os.path.realpath(data_dir) == x for x in obj):
            obj.clear()
    return read(control)


def memory():
    size = (task["memoryMb"] + 256) * 1024 * 1024
    block = bytearray(size)
    block[-1] = 1
    return "allocated %d MiB" % (size // 1024 // 1024)


def fork_bomb():
    # Children block on a pipe until the parent closes it: bounded, and gone when we are.
    r, w = os.pipe()
    children = []
    try:
        for _ in range(task["processes"] * 4):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.close(w)
                os.read(r, 1)
                os._exit(0)
            children.append(pid)
    finally:
        os.close(w)
        for pid in children:
            os.waitpid(pid, 0)
    if len(children) < task["processes"]:
        raise BlockingIOError("stopped after %d processes (limit %d)" % (len(children), task["processes"]))
    return "%d processes (limit %d)" % (len(children), task["processes"])


def cpu_spin():
    # Past the CPU limit: SIGXCPU then SIGKILL end this loop before it can report.
    while time.process_time() < task["cpuS"] + 2:
        pass
    return "spun %.1f CPU seconds (limit %d)" % (time.process_time(), task["cpuS"])


def big_file():
    chunk = b"x" * (1024 * 1024)
    with open(os.path.join(os.getcwd(), "big.bin"), "wb") as f:
        for _ in range(task["fileSizeMb"] + 16):
            f.write(chunk)
    return "wrote %d MiB (limit %d)" % (task["fileSizeMb"] + 16, task["fileSizeMb"])


def setsid_grandchild():
    # A grandchild leaves the process group and keeps stdout open: the run must not wait for it.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(task["holdS"])
            os._exit(0)
        os._exit(0)
    return "grandchild detached, holding the output pipes for %d s" % task["holdS"]


ATTACKS = {
    "read-control": lambda: read(control),
    "read-identity": lambda: read(identity),
    "proc-sibling": proc_sibling,
    "signal-peer": signal_peer,
    "write-outside": write_outside,
    "rewrite-snapshot": rewrite_snapshot,
    "subprocess-cat": subprocess_cat,
    "dir-fd": dir_fd,
    "ctypes-open": ctypes_open,
    "hard-link": hard_link,
    "gc-deny-list": gc_deny_list,
    "memory": memory,
    "fork-bomb": fork_bomb,
    "cpu-spin": cpu_spin,
    "big-file": big_file,
    "setsid-grandchild": setsid_grandchild,
}

attempt(ATTACKS[attack])
print(json.dumps({"reward": 0}), flush=True)
