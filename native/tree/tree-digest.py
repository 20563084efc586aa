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
"""
import argparse
import fnmatch
import hashlib
import json
import os
import stat
import sys

ALGORITHM = "sparkform-tree-v1"


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def walk(root, exclude_paths, exclude_names):
    records = []
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
                    records.append((rel, "l", "-", os.readlink(entry.path).decode("utf-8", "surrogateescape"), 0))
                elif stat.S_ISDIR(st.st_mode):
                    records.append((rel, "d", "-", "", 0))
                    stack.append(rel)
                elif stat.S_ISREG(st.st_mode):
                    mode = "x" if st.st_mode & 0o111 else "-"
                    records.append((rel, "f", mode, file_sha256(entry.path), st.st_size))
                # sockets, fifos and devices are not synced by TreeSync and not counted
    records.sort(key=lambda r: r[0])
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("--exclude-path", action="append", default=[])
    parser.add_argument("--exclude-name", action="append", default=[])
    parser.add_argument("--manifest", action="store_true")
    args = parser.parse_args()

    root = os.fsencode(os.path.expanduser(args.root))
    if not os.path.isdir(root):
        print(json.dumps({"algorithm": ALGORITHM, "error": "missing", "root": args.root}))
        return 3
    records = walk(root, {os.fsencode(p.strip("/")) for p in args.exclude_path}, args.exclude_name)
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
