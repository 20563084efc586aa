#!/usr/bin/env python3
"""Content digest of a directory tree, computed the same way on the control node and on every
Spark node (this one file runs on both), so TreeSync can prove a node holds exactly the synced
file set.

Algorithm sparkform-tree-v1 (bump the name when anything below changes):
  - walk ROOT without following symlinks; skip entries matched by an exclusion (an anchored
    relative path, which also drops everything under it, or a glob on the entry's base name);
  - one record per entry below ROOT: relative path (bytes, '/'-separated), type, mode, value:
      file     f  'x' if any execute bit is set else '-'   sha256 of the content
      symlink  l  '-'                                      the link's target, verbatim
      dir      d  '-'                                      ''
    ownership and timestamps are not part of it: rsync -a does not make them equal anyway;
  - records sorted by path bytes; each written as path NUL type NUL mode NUL value NUL;
  - digest = sha256 over the records, hex.

Prints one JSON object: algorithm, digest, files, dirs, symlinks, bytes (file content bytes),
and with --manifest the per-entry records as [path, type, mode, value] for finding which paths
differ.

Files are hashed by a pool of threads, one per core (hashlib releases the GIL while it hashes),
so a node with many cores proves its copy in a fraction of one core's time; the records and the
digest do not depend on the order the hashes finish in.

--cache FILE (`~` expanded): keep each file's sha256 with its (device, inode, size, mtime_ns,
ctime_ns) and reuse it while all five are unchanged, as git's index and rsync's quick check do.
ctime cannot be set from user space, so any write, rename or chmod invalidates the entry: a file
edited in place and `touch`ed back to its old mtime is still hashed again, which rsync's own
quick check (size and mtime) would miss. A file whose times are within 2 s of its hashing is not
cached (a write in the same clock tick could leave its times unchanged). The control node and
the nodes both keep one per tree; rsync writes each file it changes under a temporary name and
renames it (a new inode), so after a sync only the changed files are hashed again.
"""
import argparse
import concurrent.futures
import fnmatch
import hashlib
import json
import os
import stat
import sys
import time

ALGORITHM = "sparkform-tree-v1"


CACHE_VERSION = 1
# A file changed this close to its hashing may change again within the same clock tick.
RACY_SECONDS = 2.0


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stat_key(st):
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def load_cache(path, root):
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
        if data.get("version") == CACHE_VERSION and data.get("root") == os.fsdecode(root):
            return data["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # missing or unreadable: hash everything
    return {}


def save_cache(path, root, entries):
    # The cache lists the sha256 of files that may be 0600 (a .env in a checkout): owner only,
    # 0600 in a 0700 directory; an older cache's modes are fixed here, on its next write.
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        d = os.path.dirname(path) or "."
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(d, 0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": CACHE_VERSION, "root": os.fsdecode(root), "entries": entries}, f)
        os.replace(tmp, path)  # temp name then rename: a reader never sees half a file
    except OSError:
        pass  # an unwritable cache only costs the next run its hashing


def walk(root, exclude_paths, exclude_names):
    """Entries as (rel, kind, mode, value or None, size, abs path, stat); files' values later."""
    entries = []
    stack = [b""]
    while stack:
        rel_dir = stack.pop()
        abs_dir = os.path.join(root, rel_dir) if rel_dir else root
        with os.scandir(abs_dir) as it:
            for entry in it:
                rel = rel_dir + b"/" + entry.name if rel_dir else entry.name
                if rel in exclude_paths:
                    continue
                name = entry.name.decode("utf-8", "surrogateescape")
                if any(fnmatch.fnmatchcase(name, g) for g in exclude_names):
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(entry.path).decode("utf-8", "surrogateescape")
                    entries.append((rel, "l", "-", target, 0, None, None))
                elif stat.S_ISDIR(st.st_mode):
                    entries.append((rel, "d", "-", "", 0, None, None))
                    stack.append(rel)
                elif stat.S_ISREG(st.st_mode):
                    mode = "x" if st.st_mode & 0o111 else "-"
                    entries.append((rel, "f", mode, None, st.st_size, entry.path, st))
                # sockets, fifos and devices are not synced by TreeSync and not counted
    return entries


def hash_files(entries, cache, jobs):
    """Records (rel, kind, mode, value, size) sorted by path; fills `cache` when given."""
    started = time.time()
    old = cache if cache is not None else {}
    todo = []
    values = {}
    for rel, kind, _mode, _value, _size, path, st in entries:
        if kind != "f":
            continue
        key = os.fsdecode(rel)
        hit = old.get(key)
        if hit is not None and hit[:5] == stat_key(st):
            values[rel] = hit[5]
        else:
            todo.append((rel, path))
    if todo:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for rel, digest in zip((r for r, _ in todo), pool.map(file_sha256, (p for _, p in todo))):
                values[rel] = digest
    if cache is not None:
        cache.clear()
        for rel, kind, _mode, _value, _size, _path, st in entries:
            if kind == "f" and max(st.st_mtime_ns, st.st_ctime_ns) / 1e9 < started - RACY_SECONDS:
                cache[os.fsdecode(rel)] = stat_key(st) + [values[rel]]
    records = [
        (rel, kind, mode, values[rel] if kind == "f" else value, size)
        for rel, kind, mode, value, size, _path, _st in entries
    ]
    records.sort(key=lambda r: r[0])
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("--exclude-path", action="append", default=[])
    parser.add_argument("--exclude-name", action="append", default=[])
    parser.add_argument("--manifest", action="store_true")
    parser.add_argument("--cache", help="reuse file hashes kept here while a file's stat is unchanged")
    parser.add_argument("--jobs", type=int, default=min(32, os.cpu_count() or 1), help="hashing threads")
    args = parser.parse_args()

    root = os.fsencode(os.path.expanduser(args.root))
    if not os.path.isdir(root):
        print(json.dumps({"algorithm": ALGORITHM, "error": "missing", "root": args.root}))
        return 3
    entries = walk(root, {os.fsencode(p.strip("/")) for p in args.exclude_path}, args.exclude_name)
    cache_file = os.path.expanduser(args.cache) if args.cache else None
    cache = load_cache(cache_file, root) if cache_file else None
    records = hash_files(entries, cache, max(1, args.jobs))
    if cache_file:
        save_cache(cache_file, root, cache)
    h = hashlib.sha256()
    for rel, kind, mode, value, _size in records:
        h.update(rel + b"\0" + kind.encode() + b"\0" + mode.encode() + b"\0" + value.encode("utf-8", "surrogateescape") + b"\0")
    out = {
        "algorithm": ALGORITHM,
        "digest": h.hexdigest(),
        "files": sum(1 for r in records if r[1] == "f"),
        "dirs": sum(1 for r in records if r[1] == "d"),
        "symlinks": sum(1 for r in records if r[1] == "l"),
        "bytes": sum(r[4] for r in records),
    }
    if args.manifest:
        out["manifest"] = [[r[0].decode("utf-8", "surrogateescape"), r[1], r[2], r[3]] for r in records]
    json.dump(out, sys.stdout, ensure_ascii=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
