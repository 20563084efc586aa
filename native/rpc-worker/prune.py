# Runs on a worker node, after prewarm.py: hold ggml-rpc-server's tensor cache under a bound.
# Upstream's `-c` cache never evicts (llama.cpp #27585: ~500 GB seen): the server writes every
# tensor over 10 MiB it is sent and reads it back by name, forever.
#
# What is kept, whatever the bound: every entry the worker's manifest lists (the staged model's
# tensors, MANIFEST as prewarm.py writes it), and every entry any manifest in its directory
# lists. What may be deleted is native/lib/guard.sh's rule, read from the same store as
# prewarm.py keeps it (~/.cache/sparkform/refs/<sha256 of the entry's path, 16 hex>/): only an
# entry sparkform created (`created`) that no resource references (no `ref-*`) and no manifest
# lists; only a regular file (never a link) whose name is exactly 16 hex digits (the server's
# naming). An entry ggml-rpc-server wrote itself is never deleted: it counts toward the bound
# (it fills the same disk) and the summary says how many bytes of it there are.
#
# Order: least recently used first. "Used" is the later of atime and mtime: a hit reads the
# whole file (atime), a write sets both. Under relatime (the default mount option) atime moves
# at most once a day, which is the granularity of this order; under noatime it never moves and
# the order is by mtime (the write): `clock` in the summary says which the mount allows.
#
# The bound: MAX_BYTES > 0 is it; 0 = no bound (nothing is deleted, never over); `auto` = the
# manifest's bytes plus half of the room the rest of the cache may have (its other entries plus
# the free space of the cache's filesystem, after the staged models, which are on disk before
# this runs), floored to a GiB and at least 1 GiB: the unneeded entries may take at most as
# much as stays free.
# `all`: delete every entry the rule allows (destroy: what prewarm.py --retain kept goes too).
# --check: say what a prune would do, delete nothing (refresh).
# A pre-warm killed mid-copy leaves its helper's `.sparkform-tmp-<pid>` (prewarm.py's HELPER_C)
# behind: it fills the disk, so the bound counts it, and nothing would ever delete it. Under the
# lock (which the pre-warm holds for its whole run) such a file goes first, before the bound is
# judged, when its writer is gone: no process has the pid, or the pid now belongs to a process
# that is not the helper (the pid was reused: /proc/<pid>/cmdline's first word is not
# fnv-copy-*). A file written in the last TEMP_AGE seconds is never judged (a writer on another
# host sharing the directory, a pid just handed out). With no bound (0) nothing is deleted.
# Arguments: CACHE_DIR MANIFEST MAX_BYTES|auto|all [--check]
# Output: one JSON line, the summary, or {"error": …} with exit 3 (nothing deleted).
import fcntl
import json
import os
import re
import sys
import time
from contextlib import nullcontext

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from refstore import deletable, forget  # noqa: E402

NAME = re.compile(r"[0-9a-f]{16}")
MANIFEST = re.compile(r"prewarm-[0-9]+\.json")
# prewarm.py's helper: its temporary and its executable's name (fnv-copy-<12 hex>).
TEMP = re.compile(r"\.sparkform-tmp-([0-9]{1,10})")
HELPER_EXE = "fnv-copy-"
TEMP_AGE = 120
MAX_MANIFEST = 64 * 2**20
GIB = 2**30


def listed(path):
    """The entry names a manifest lists (16 hex digits only); a manifest unreadable = none."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_MANIFEST + 1)
        data = json.loads(raw) if len(raw) <= MAX_MANIFEST else {}
    except (OSError, ValueError):
        return set()
    entries = data.get("entries") if isinstance(data, dict) else None
    return {h for h in entries if NAME.fullmatch(h)} if isinstance(entries, dict) else set()


def writer_alive(pid):
    """Whether `pid` is a running pre-warm helper (a pid reused by another program is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive; its name below
    except (OverflowError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read(4096).split(b"\0", 1)[0]
    except FileNotFoundError:
        return False  # exited since
    except OSError:
        return True  # unreadable: never judged dead
    return os.path.basename(argv0).decode("utf-8", "replace").startswith(HELPER_EXE)


def stale_temp(name, st):
    """A pre-warm helper's temporary whose writer is gone (and old enough to say so)."""
    m = TEMP.fullmatch(name)
    if not m or st.st_mtime > time.time() - TEMP_AGE:
        return False
    return not writer_alive(int(m.group(1)))


def clock(path):
    """'atime' unless the filesystem holding path is mounted noatime (then 'mtime')."""
    best, opts = "", ""
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, opts = mnt, parts[3]
    except OSError:
        return "atime"
    return "mtime" if "noatime" in opts.split(",") else "atime"


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--check"):
        return {"error": "usage: prune.py CACHE_DIR MANIFEST MAX_BYTES|auto|all [--check]"}
    cache, manifest, bound_arg = os.path.expanduser(argv[0]), os.path.expanduser(argv[1]), argv[2]
    check = len(argv) == 4
    if bound_arg not in ("auto", "all") and not re.fullmatch(r"[0-9]{1,20}", bound_arg):
        return {"error": f"MAX_BYTES {bound_arg[:40]!r} is not a number of bytes, 'auto' or 'all'"}
    # No cache directory (the cache off, or never used): nothing to delete, and none is made.
    present = os.path.isdir(cache)
    cache = os.path.realpath(cache)
    if present:
        # prewarm.py's lock: a prune never interleaves with a pre-warm's references.
        lock = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(lock, fcntl.LOCK_EX)

    need = listed(manifest)
    state = os.path.dirname(os.path.abspath(manifest))
    others = set()
    if os.path.isdir(state):
        for n in os.listdir(state):
            p = os.path.join(state, n)
            if MANIFEST.fullmatch(n) and os.path.abspath(p) != os.path.abspath(manifest):
                others |= listed(p)

    entries, temps, total, needed, foreign, count = [], [], 0, 0, 0, 0
    with os.scandir(cache) if present else nullcontext([]) as it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not e.is_file(follow_symlinks=False):
                continue
            total += st.st_size  # everything in the directory fills the disk: the bound counts it
            if stale_temp(e.name, st):
                temps.append((e.name, st.st_size))
                continue
            if not NAME.fullmatch(e.name):
                continue
            count += 1
            if e.name in need:
                needed += st.st_size
            elif e.name not in others and deletable(os.path.join(cache, e.name)):
                entries.append((max(st.st_atime_ns, st.st_mtime_ns), e.name, st.st_size))
                continue
            if e.name not in need:
                foreign += st.st_size

    if bound_arg == "auto":
        where = cache
        while not os.path.isdir(where):
            where = os.path.dirname(where)
        vfs = os.statvfs(where)
        free = vfs.f_bavail * vfs.f_frsize
        bound = (needed + (free + total - needed) // 2) // GIB * GIB
        # Never below what the model needs, nor below 1 GiB (the config's floor): never 0, "none".
        bound = max(bound, needed, GIB)
    elif bound_arg == "all":
        bound = 0
    else:
        bound = int(bound_arg)

    deleted, freed, after = 0, 0, total
    reclaimable = sum(s for _, _, s in entries)
    # A killed pre-warm's temporaries first (no bound: nothing deleted, these neither).
    temps = temps if bound_arg == "all" or bound > 0 else []
    for name, size in temps:
        if not check:
            try:
                os.unlink(os.path.join(cache, name))
            except FileNotFoundError:
                pass
        after -= size
    if bound_arg == "all" or (bound > 0 and after > bound):
        for _, name, size in sorted(entries):
            if bound > 0 and after <= bound:
                break
            if not check:
                try:
                    os.unlink(os.path.join(cache, name))
                except FileNotFoundError:
                    pass
                forget(os.path.join(cache, name))
            deleted += 1
            freed += size
            after -= size
    return {
        "entries": count - deleted,
        "maxBytes": bound,
        "derived": bound_arg == "auto",
        "bytesBefore": total,
        "bytesAfter": after,
        "deleted": deleted,
        "deletedBytes": freed,
        "tempsDeleted": len(temps),
        "tempBytes": sum(s for _, s in temps),
        "neededBytes": needed,
        "keptBytes": foreign,
        "reclaimableBytes": reclaimable - freed,
        "over": bound > 0 and total > bound,
        "stillOver": bound > 0 and after > bound,
        "clock": clock(cache),
        "check": check,
    }


if __name__ == "__main__":
    out = main(sys.argv[1:])
    print(json.dumps(out))
    sys.exit(3 if "error" in out else 0)
