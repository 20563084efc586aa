# nodefs.py — files as node programs read them: a file's sha256, and a log's head and tail
# read in bounded windows (a worker's debug log or a busy server's grows to gigabytes).
# Imported by native/unit/status.py and native/rpc-worker/prewarm.py; inlined in place of the
# import when a program is sent to a node (components/native-script.ts).
import hashlib


def file_sha256(path, chunk=1 << 22):
    """The sha256 of the file at `path`, hex; OSError when it cannot be read."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(chunk), b""):
            h.update(b)
    return h.hexdigest()


def sha256_or_empty(path):
    """file_sha256, or "" when there is no such file (a unit that is not running has no exe)."""
    try:
        return file_sha256(path)
    except OSError:
        return ""


# A log is read at most HEAD bytes from its start, where the banner and the load lines are, and
# enough of its end for the last lines.
HEAD = 1 << 20
TAIL = 1 << 20


def decoded(b):
    return b.decode("utf-8", "replace").splitlines()


def last_lines(f, size, n, cap):
    """The last n lines of the file's last `cap` bytes, read in growing windows from the end."""
    window = 1 << 16
    while True:
        window = min(window, size, cap)
        f.seek(size - window)
        b = f.read(window)
        if window < size and b"\n" in b:
            b = b[b.index(b"\n") + 1:]  # a partial first line is not a line of the log
        lines = decoded(b)
        if len(lines) >= n or window >= min(size, cap):
            return lines[-n:]
        window *= 4


def log_lines(path, marks, keep):
    """The lines holding one of `marks` in the log's head, then its last `keep` lines."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            if size <= HEAD + TAIL:
                lines = decoded(f.read())
                return [l for l in lines[:-keep] if any(m in l for m in marks)] + lines[-keep:]
            head = f.read(HEAD)
            head = decoded(head[: head.rindex(b"\n") + 1] if b"\n" in head else b"")
            return [l for l in head if any(m in l for m in marks)] + last_lines(f, size, keep, TAIL)
    except OSError:
        return []


def tail(path, n, cap=16 << 20):
    """Exactly the log's last n lines (from at most its last `cap` bytes)."""
    if n <= 0:
        return []
    try:
        with open(path, "rb") as f:
            return last_lines(f, f.seek(0, 2), n, cap)
    except OSError:
        return []


# A log left on a node stays bounded: past CAP bytes it is cut, in place, to its marked head
# lines and its last KEEP bytes (the unit appends: O_APPEND writes land at the new end).
CAP = 64 << 20
KEEP = 16 << 20


def bound(path, marks):
    try:
        with open(path, "r+b") as f:
            size = f.seek(0, 2)
            if size <= CAP:
                return
            f.seek(0)
            head = f.read(HEAD)
            head = head[: head.rindex(b"\n") + 1] if b"\n" in head else b""
            kept = b"".join(l + b"\n" for l in head.splitlines() if any(m.encode() in l for m in marks))
            f.seek(size - KEEP)
            rest = f.read(KEEP)
            rest = rest[rest.index(b"\n") + 1:] if b"\n" in rest else b""
            note = b"--- sparkform: the log was cut to its load lines and its last %d MiB ---\n" % (KEEP >> 20)
            f.seek(0)
            f.truncate(0)
            f.write(kept + note + rest)
    except OSError:
        pass
