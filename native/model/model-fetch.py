#!/usr/bin/env python3
# Model files on a node: download from a Hugging Face-compatible endpoint, verify, place,
# measure and remove. Python 3 standard library only; sent to the node on stdin by
# components/model/provider.ts and run as `python3 - <command> <json spec>`.
#
#   fetch    download every file not already in place into <file>.part (resumed with Range),
#            verify size + SHA-256, then rename into place and fsync. A free-space check for
#            all files comes first. The token, if any, is read from $HF_TOKEN (delivered on
#            stdin by the transport, never on a command line) and sent only to the endpoint's
#            host: a redirect to another host drops it.
#   place    verify <file>.part files (copied by rsync from a peer) and rename them into place.
#   prepare  free-space check for files about to be copied; a wrong final file becomes the
#            .part (rsync's delta basis), so a repair moves only the changed blocks.
#   measure  size, mtime and (with "hash": true) SHA-256 of each file, and its .part's size.
#   remove   delete the named files (and their .part) and then-empty parent directories.
#
# Output: machine-readable lines on stdout, each "@<kind> <json>":
#   @progress {"file","done","total","rate","eta"}   at most every `progressEvery` seconds
#   @event    {"file","event", ...}                  resume / restart / present / placed / ...
#   @result   {...}                                  last line, on success
# Failures: a message on stderr starting "model-fetch:", and an exit code:
#   2 usage, 3 SHA-256 or size mismatch (the .part is removed), 4 not enough free space,
#   5 HTTP / network failure (the .part is kept for a resume).
import hashlib
import http.client
import json
import os
import socket
import sys
import time
import urllib.parse

CHUNK = 1 << 20
EXIT_USAGE, EXIT_MISMATCH, EXIT_SPACE, EXIT_HTTP = 2, 3, 4, 5


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def emit(kind, obj):
    sys.stdout.write("@%s %s\n" % (kind, json.dumps(obj, sort_keys=True)))
    sys.stdout.flush()


def human(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0
    return "%d B" % n


def base_dir(spec):
    d = spec["dir"]
    return os.path.expanduser(d) if d.startswith("~") else d


def dest_of(spec, f):
    return os.path.join(base_dir(spec), *f["path"].split("/"))


def size_or(p, default=None):
    try:
        return os.stat(p).st_size
    except FileNotFoundError:
        return default


def sha256_file(p, limit=None):
    h = hashlib.sha256()
    left = limit
    with open(p, "rb") as fh:
        while left is None or left > 0:
            b = fh.read(CHUNK if left is None else min(CHUNK, left))
            if not b:
                break
            h.update(b)
            if left is not None:
                left -= len(b)
    return h


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def free_bytes(d):
    """Bytes available to this user on the filesystem holding `d` (nearest existing parent)."""
    p = d
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


def space_needed(spec, files):
    """Bytes still to write for `files`: the rest of each file after what its .part holds."""
    need = 0
    for f in files:
        have = size_or(dest_of(spec, f) + ".part", 0)
        need += f["size"] - have if 0 <= have <= f["size"] else f["size"]
    return need


def check_space(spec, files):
    need = space_needed(spec, files)
    free = free_bytes(base_dir(spec))
    reserve = int(spec.get("reserveBytes", 0))
    if need + reserve > free:
        raise Failure(
            EXIT_SPACE,
            "not enough free space for %s under %s: need %d bytes (%s)%s, %d bytes (%s) free; "
            "nothing was downloaded. Free up %d bytes (%s) there, then run up again."
            % (
                ", ".join(f["path"] for f in files),
                spec["dir"],
                need,
                human(need),
                (" + %d reserved" % reserve) if reserve else "",
                free,
                human(free),
                need + reserve - free,
                human(need + reserve - free),
            ),
        )
    return need, free


def place(spec, f, part, digest_hex):
    """Rename a verified .part into place, then fsync the file and its directory."""
    dest = dest_of(spec, f)
    if digest_hex != f["sha256"]:
        os.unlink(part)
        raise Failure(
            EXIT_MISMATCH,
            "SHA-256 mismatch for %s: the bytes received hash to %s, but the hub says %s. "
            "Removed %s; nothing was placed at %s. The server or something in between sent "
            "wrong bytes: check the endpoint, then run up again."
            % (f["path"], digest_hex, f["sha256"], part, dest),
        )
    fd = os.open(part, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(part, 0o644)
    os.replace(part, dest)
    fsync_dir(os.path.dirname(dest))
    st = os.stat(dest)
    emit("event", {"file": f["path"], "event": "placed", "size": st.st_size})


def good_in_place(f, dest):
    """(True, mtime) when `dest` has the expected size and hash; a trusted mtime skips hashing."""
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        return False, None
    if st.st_size != f["size"]:
        return False, st.st_mtime_ns
    trust = f.get("trustMtimeNs")
    if trust is not None and str(st.st_mtime_ns) == str(trust):
        return True, st.st_mtime_ns
    return sha256_file(dest).hexdigest() == f["sha256"], st.st_mtime_ns


class Progress:
    def __init__(self, path, total, every):
        self.path, self.total, self.every = path, total, every
        self.t0 = time.monotonic()
        self.last = 0.0
        self.start_bytes = None

    def begin(self, offset):
        """A (re)started transfer from `offset`: the rate counts only bytes moved since."""
        self.t0 = time.monotonic()
        self.start_bytes = offset

    def update(self, done, force=False):
        now = time.monotonic()
        if self.start_bytes is None:
            self.start_bytes = 0
        if not force and now - self.last < self.every:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-6)
        rate = (done - self.start_bytes) / elapsed
        eta = 0 if done >= self.total else ((self.total - done) / rate if rate > 0 else None)
        emit(
            "progress",
            {
                "file": self.path,
                "done": done,
                "total": self.total,
                "rate": round(rate),
                "eta": None if eta is None else round(eta, 1),
            },
        )


def open_url(url, token, offset, timeout, redirects=5):
    """GET `url` with Range from `offset`; Authorization only to the endpoint's own host."""
    origin = urllib.parse.urlsplit(url).netloc
    for _ in range(redirects + 1):
        u = urllib.parse.urlsplit(url)
        conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(u.netloc, timeout=timeout)
        headers = {"User-Agent": "sparkform-model-fetch/1", "Accept-Encoding": "identity"}
        if offset > 0:
            headers["Range"] = "bytes=%d-" % offset
        if token and u.netloc == origin:
            headers["Authorization"] = "Bearer " + token
        target = u.path + (("?" + u.query) if u.query else "")
        conn.request("GET", target, headers=headers)
        resp = conn.getresponse()
        if resp.status in (301, 302, 303, 307, 308):
            loc = resp.getheader("Location")
            resp.read()
            conn.close()
            if not loc:
                raise Failure(EXIT_HTTP, "redirect without Location from %s" % url)
            url = urllib.parse.urljoin(url, loc)
            continue
        return conn, resp
    raise Failure(EXIT_HTTP, "too many redirects fetching %s" % url)


def download_once(spec, f, token, prog):
    """One attempt: returns the hex SHA-256 of the complete .part, or raises."""
    dest = dest_of(spec, f)
    part = dest + ".part"
    size = f["size"]
    have = size_or(part, 0)
    if have > size:
        emit("event", {"file": f["path"], "event": "discard-oversized-part", "had": have})
        os.unlink(part)
        have = 0
    if have == size:
        return sha256_file(part).hexdigest()
    timeout = float(spec.get("timeoutS", 60))
    conn, resp = open_url(f["url"], token, have, timeout)
    try:
        if resp.status == 206:
            cr = resp.getheader("Content-Range") or ""
            expect = "bytes %d-%d/%d" % (have, size - 1, size)
            if cr.strip() != expect:
                raise Failure(
                    EXIT_HTTP,
                    "%s: asked for bytes %d- and got Content-Range %r, expected %r"
                    % (f["path"], have, cr, expect),
                )
            h = sha256_file(part, have)
            mode = "r+b"
            emit("event", {"file": f["path"], "event": "resume", "from": have})
        elif resp.status == 200:
            if have > 0:
                # The server ignored Range: its body starts at byte 0. Appending it would corrupt
                # the file, so start over.
                emit("event", {"file": f["path"], "event": "restart", "ignoredRangeFrom": have})
            have = 0
            h = hashlib.sha256()
            mode = "wb"
        elif resp.status == 401 or resp.status == 403:
            raise Failure(
                EXIT_HTTP,
                "%s: HTTP %d from the endpoint: the token is missing or not allowed to read %s "
                "(set it with `pulumi config set --secret hfToken`)"
                % (f["path"], resp.status, spec.get("repo", "the repo")),
            )
        else:
            raise Failure(EXIT_HTTP, "%s: HTTP %d %s" % (f["path"], resp.status, resp.reason))
        length = resp.getheader("Content-Length")
        if length is not None and int(length) != size - have:
            raise Failure(
                EXIT_HTTP,
                "%s: the server announced %s bytes from offset %d, expected %d"
                % (f["path"], length, have, size - have),
            )
        done = have
        prog.begin(have)
        with open(part, mode) as out:
            out.seek(have)
            out.truncate()
            try:
                while done < size:
                    # read1: what has arrived (up to CHUNK), so progress moves on slow links.
                    b = resp.read1(min(CHUNK, size - done))
                    if not b:
                        break
                    out.write(b)
                    h.update(b)
                    done += len(b)
                    prog.update(done)
            except (OSError, http.client.HTTPException) as e:
                out.flush()
                raise Failure(
                    EXIT_HTTP,
                    "%s: download interrupted at byte %d of %d (%.0f%%): %s; the .part is kept "
                    "and the next attempt resumes from there"
                    % (f["path"], done, size, 100.0 * done / size, e),
                )
            if done < size:
                raise Failure(
                    EXIT_HTTP,
                    "%s: download interrupted at byte %d of %d (%.0f%%): the connection closed "
                    "early; the .part is kept and the next attempt resumes from there"
                    % (f["path"], done, size, 100.0 * done / size),
                )
            if resp.read(1):
                out.close()
                os.unlink(part)
                raise Failure(
                    EXIT_MISMATCH,
                    "%s: the server sent more than the %d bytes the hub lists; removed the .part"
                    % (f["path"], size),
                )
        prog.update(done, force=True)
        return h.hexdigest()
    finally:
        conn.close()


def cmd_fetch(spec):
    token = os.environ.get("HF_TOKEN") or None
    todo = []
    for f in spec["files"]:
        dest = dest_of(spec, f)
        ok, mtime = good_in_place(f, dest)
        if ok:
            emit("event", {"file": f["path"], "event": "present"})
            continue
        if mtime is not None:
            # A wrong file where ours belongs (this commit's directory holds only this model).
            emit("event", {"file": f["path"], "event": "discard-wrong-file"})
            os.unlink(dest)
        todo.append(f)
    if todo:
        # Before anything is created or downloaded.
        need, free = check_space(spec, todo)
        emit("event", {"event": "space", "need": need, "free": free})
        for f in todo:
            os.makedirs(os.path.dirname(dest_of(spec, f)), exist_ok=True)
    retries = int(spec.get("retries", 2))
    every = float(spec.get("progressEvery", 1.0))
    for f in todo:
        prog = Progress(f["path"], f["size"], every)
        attempt = 0
        while True:
            try:
                digest = download_once(spec, f, token, prog)
                break
            except (OSError, http.client.HTTPException, Failure) as e:
                transient = not isinstance(e, Failure) or e.code == EXIT_HTTP
                if not transient or attempt >= retries:
                    if isinstance(e, Failure):
                        raise
                    raise Failure(EXIT_HTTP, "%s: %s" % (f["path"], e))
                attempt += 1
                emit("event", {"file": f["path"], "event": "retry", "attempt": attempt, "error": str(e)})
                time.sleep(min(2.0 * attempt, 10.0))
        place(spec, f, dest_of(spec, f) + ".part", digest)
    cmd_measure({**spec, "hash": False})


def cmd_prepare(spec):
    """Before a peer copy: wrong final files become the .part (delta basis); space check."""
    todo = []
    for f in spec["files"]:
        dest = dest_of(spec, f)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        ok, mtime = good_in_place(f, dest)
        if ok:
            emit("event", {"file": f["path"], "event": "present"})
            continue
        if mtime is not None:
            os.replace(dest, dest + ".part")
            emit("event", {"file": f["path"], "event": "wrong-file-to-part"})
        todo.append(f)
    need, free = check_space(spec, todo) if todo else (0, free_bytes(base_dir(spec)))
    emit("result", {"todo": [f["path"] for f in todo], "need": need, "free": free})


def cmd_place(spec):
    for f in spec["files"]:
        part = dest_of(spec, f) + ".part"
        got = size_or(part)
        if got is None:
            raise Failure(EXIT_MISMATCH, "%s: no %s to place" % (f["path"], part))
        if got != f["size"]:
            os.unlink(part)
            raise Failure(
                EXIT_MISMATCH,
                "%s: the copy has %d bytes, the hub says %d; removed the .part, nothing placed"
                % (f["path"], got, f["size"]),
            )
        place(spec, f, part, sha256_file(part).hexdigest())
    cmd_measure({**spec, "hash": False})


def cmd_measure(spec):
    out = []
    for f in spec["files"]:
        dest = dest_of(spec, f)
        row = {"path": f["path"], "present": False, "size": 0, "mtimeNs": "", "sha256": ""}
        try:
            st = os.stat(dest)
            row.update(present=True, size=st.st_size, mtimeNs=str(st.st_mtime_ns))
            if spec.get("hash"):
                row["sha256"] = sha256_file(dest).hexdigest()
        except FileNotFoundError:
            pass
        row["partBytes"] = size_or(dest + ".part", 0)
        out.append(row)
    emit("result", {"files": out})


def cmd_remove(spec):
    removed = []
    root = os.path.realpath(os.path.expanduser(spec["root"]))
    for f in spec["files"]:
        dest = dest_of(spec, f)
        for p in (dest, dest + ".part"):
            try:
                os.unlink(p)
                removed.append(p)
            except FileNotFoundError:
                pass
        # Then-empty parents, never above the models root.
        d = os.path.dirname(dest)
        while os.path.realpath(d).startswith(root + os.sep):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
    emit("result", {"removed": removed})


COMMANDS = {
    "fetch": cmd_fetch,
    "place": cmd_place,
    "prepare": cmd_prepare,
    "measure": cmd_measure,
    "remove": cmd_remove,
}


def main(argv):
    if len(argv) != 2 or argv[0] not in COMMANDS:
        sys.stderr.write("usage: model-fetch.py {%s} <json spec>\n" % "|".join(COMMANDS))
        return EXIT_USAGE
    try:
        COMMANDS[argv[0]](json.loads(argv[1]))
    except Failure as e:
        sys.stderr.write("model-fetch: %s\n" % e)
        return e.code
    except (OSError, socket.timeout) as e:
        sys.stderr.write("model-fetch: %s\n" % e)
        return EXIT_HTTP if isinstance(e, (socket.timeout, ConnectionError)) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
