"""Starts an agent script under an audit hook that refuses to open files of the peer's data directory (other
than the script's own folder) and other processes' /proc entries (their environment holds their episode keys).

Usage: python3 python-guard.py '{"deny": [...], "allow": [...]}' script.py
Only where the runner has no real sandbox (sandbox.ts: bubblewrap absent, not Linux). It is NOT a boundary: an
audit hook sees paths, not files, and a hostile script gets past it (a subprocess, a path relative to a directory
fd, ctypes, a hard link, emptying the lists through gc — testing/hostile/attacks.py tries each). It stops honest
mistakes only; the runner reports such peers as "not isolated". Node scripts get Node's permission model instead.
"""
import json
import os
import runpy
import sys

_policy = json.loads(sys.argv[1])
_deny = [os.path.realpath(p) for p in _policy["deny"]]
_allow = [os.path.realpath(p) for p in _policy["allow"]]
_own_proc = ("/proc/self", "/proc/thread-self", "/proc/%d" % os.getpid())


def _inside(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _guard(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes)):
        return
    raw = os.fsdecode(args[0])
    path = os.path.realpath(raw)
    if path.startswith("/proc/") and not any(_inside(raw, p) or _inside(path, p) for p in _own_proc):
        raise PermissionError("agentjet sandbox: reading other processes is not allowed: " + raw)
    if any(_inside(path, d) for d in _deny) and not any(_inside(path, a) for a in _allow):
        raise PermissionError("agentjet sandbox: the peer's data directory is off limits: " + raw)


sys.addaudithook(_guard)
_script = sys.argv[2]
sys.argv = [_script] + sys.argv[3:]
sys.path.insert(0, os.path.dirname(os.path.abspath(_script)))
runpy.run_path(_script, run_name="__main__")
