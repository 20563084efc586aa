#!/usr/bin/env python3
# Model files on a node: download from a Hugging Face-compatible endpoint, verify, place,
# measure and remove. Python 3 standard library only; sent to the node on stdin by
# components/model/provider.ts and run as `python3 - <command> <json spec>`.
#
#   fetch    download every file not already in place into <file>.part (resumed with Range),
#            verify size + SHA-256, then rename into place and fsync. A free-space check for
#            all files comes first. The token, if any, is read from $HF_TOKEN (delivered on
#            stdin by the transport, never on a command line) and sent only to the endpoint's
#            own origin (scheme, host and port): a redirect to another origin drops it. It never
#            travels in clear: over http only to loopback or the simulated cluster's control
#            address; an https URL redirected to http is refused, as is an endpoint URL with
#            user-info or a query string. A CA file for a private endpoint: $SSL_CERT_FILE.
#   place    verify <file>.part files (copied by rsync from a peer) and rename them into place.
#   prepare  free-space check for files about to be copied; a wrong final file becomes the
#            .part (rsync's delta basis), so a repair moves only the changed blocks.
#   measure  size, mtime and (with "hash": true) SHA-256 of each file, and its .part's size.
#            With "ref": TOKEN (the resource's reference, already recorded by prepare-dir.sh)
#            it also records the files as TOKEN's list beside the directory's references.
#   remove   delete the named files (and their .part) and then-empty parent directories, except
#            a file another reference of the directory still lists ("ref": the caller's own,
#            left out of that count): two resources (two stacks) may share one revision's
#            directory, and a file dropped from one model is still the other's. A reference
#            with no list (recorded before the lists) keeps every file: what it uses is unknown.
#
# Output: machine-readable lines on stdout, each "@<kind> <json>":
#   @progress {"file","done","total","rate","eta"}   at most every `progressEvery` seconds
#   @event    {"file","event", ...}                  resume / restart / present / placed / ...
#   @result   {...}                                  last line, on success
# Failures: a message on stderr starting "model-fetch:", and an exit code:
#   2 usage, 3 SHA-256 or size mismatch (the .part is removed), 4 not enough free space
#   (before a download, or the disk filling during one: the .part is removed, no retry),
#   5 HTTP / network failure (the .part is kept for a resume), 6 refused for the token's sake
#   (plain http, a downgrade, user-info), 97 a directory or file path it must not write or
#   delete (the checks of native/lib/guard.sh, here in Python).
import errno
import hashlib
import http.client
import ipaddress
import json
import os
import pwd
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from refstore import refs_dir  # noqa: E402

CHUNK = 1 << 20
EXIT_USAGE, EXIT_MISMATCH, EXIT_SPACE, EXIT_HTTP, EXIT_INSECURE = 2, 3, 4, 5, 6
EXIT_GUARD = 97
# A reference token (native/lib/guard.sh guard_token): letters, digits and '-'.
REF_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
# A full disk or quota: not a network blip, so neither retried nor resumed.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


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


def guarded_dir(d, what):
    """`d` resolved, when it is a directory sparkform may write into or delete from.

    The checks of native/lib/guard.sh: not the root, $HOME or anything containing it; no '.',
    '..' or empty parts; below $HOME no part is a symlink (it resolves to <home>/<rest>); a path
    outside $HOME at least two parts deep; the directory itself never a symlink.
    """

    def refuse(why):
        raise Failure(EXIT_GUARD, "refusing to %s %s: %s" % (what, d, why))

    # $HOME as the login gave it; the account's home when unset (a bare environment).
    env_home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    if not env_home.startswith("/"):
        refuse("$HOME (%r) is not an absolute directory" % env_home)
    env_home = env_home.rstrip("/") or "/"
    home = os.path.realpath(env_home)
    if home == "/":
        refuse("$HOME is /")
    if d == "~" or d.startswith("~/"):
        a = env_home + d[1:]
    elif d.startswith("/"):
        a = d
    else:
        a = env_home + "/" + d
    a = a.rstrip("/") or "/"
    if a != "/" and any(p in ("", ".", "..") for p in a.split("/")[1:]):
        refuse("it has a '.', '..' or empty part")
    r = os.path.realpath(a)
    if r == "/":
        refuse("it is the root directory")
    if (home + "/").startswith(r + "/"):
        refuse("it is $HOME (%s) or contains it" % home)
    if os.path.islink(a):
        refuse("it is a symlink (to %s)" % os.readlink(a))
    if a.startswith(env_home + "/"):
        want = home + "/" + a[len(env_home) + 1 :]
        if r != want:
            refuse("it resolves to %s through a symlink, not to %s" % (r, want))
    elif r.count("/") < 2:
        refuse("it resolves to %s, too close to /" % r)
    return r


def base_dir(spec):
    return guarded_dir(spec["dir"], "write into")


def dest_of(spec, f):
    """A file of the spec below its directory: a plain relative path that stays inside it."""
    p = f["path"]
    parts = p.split("/")
    if not isinstance(p, str) or any(x in ("", ".", "..") for x in parts) or "\0" in p:
        raise Failure(EXIT_GUARD, "refusing file path %r: not a plain relative path" % (p,))
    base = base_dir(spec)
    dest = os.path.join(base, *parts)
    if not os.path.realpath(dest).startswith(base + os.sep):
        raise Failure(
            EXIT_GUARD, "refusing file path %r: it resolves outside %s through a symlink" % (p, base)
        )
    return dest


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


def origin_of(u):
    """(scheme, host, port) of a split URL: what must match for the token to go along."""
    try:
        port = u.port
    except ValueError:
        raise Failure(EXIT_USAGE, "the URL %s has an invalid port" % u.geturl())
    return (u.scheme, (u.hostname or "").lower(), port or (443 if u.scheme == "https" else 80))


def sim_control_addresses(hosts="/etc/hosts"):
    """Private addresses /etc/hosts names `control`: the simulated cluster's control node.

    The sim writes that line on every node (sim/index.ts); its hub listens there over plain
    http on a network that exists only inside the test bed.
    """
    out = set()
    try:
        with open(hosts) as fh:
            for line in fh:
                fields = line.split("#", 1)[0].split()
                if len(fields) >= 2 and "control" in fields[1:]:
                    try:
                        ip = ipaddress.ip_address(fields[0])
                    except ValueError:
                        continue
                    if ip.is_private and not ip.is_loopback:
                        out.add(str(ip))
    except OSError:
        pass
    return out


def clear_text_ok(host):
    """Whether a token may travel over plain http to `host`: loopback or the sim's control."""
    if host == "localhost":
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        return False
    return host in sim_control_addresses()


def checked_url(url, first):
    u = urllib.parse.urlsplit(url)
    what = "the endpoint URL" if first else "a redirect to"
    if u.scheme not in ("http", "https") or not u.hostname:
        raise Failure(EXIT_INSECURE, "%s %s is not an http(s) URL with a host" % (what, url))
    if "@" in u.netloc:
        raise Failure(
            EXIT_INSECURE,
            "%s %s has user-info (user:password@): credentials never go in a URL; "
            "set the token with `pulumi config set --secret hfToken`" % (what, url.split("@")[-1]),
        )
    if first and (u.query or u.fragment):
        raise Failure(
            EXIT_INSECURE,
            "the endpoint URL %s has a query string or fragment; give the endpoint's base URL "
            "(sparkform:model.endpoint), e.g. https://huggingface.co" % url.split("?")[0],
        )
    return u


def open_url(url, token, offset, timeout, redirects=5):
    """GET `url` with Range from `offset`; the token only to the endpoint's own origin.

    Never in clear: a token goes over http only to loopback or the sim's control address
    (else the download is refused before any request), an https URL redirected to http is
    refused, and a redirect to another origin (a CDN) drops it.
    """
    first = checked_url(url, True)
    origin = origin_of(first)
    if token and first.scheme == "http" and not clear_text_ok(origin[1]):
        raise Failure(
            EXIT_INSECURE,
            "refusing to send the hub token over plain http to %s: it would travel in clear. "
            "Use the endpoint's https:// URL in sparkform:model.endpoint" % origin[1],
        )
    prev = first
    for i in range(redirects + 1):
        u = first if i == 0 else checked_url(url, False)
        if prev.scheme == "https" and u.scheme != "https":
            raise Failure(
                EXIT_INSECURE,
                "%s redirected from https to %s://%s: refusing the downgrade (the request and "
                "any token would travel in clear); the endpoint must serve https throughout"
                % (prev.hostname, u.scheme, u.netloc),
            )
        prev = u
        conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(u.netloc, timeout=timeout)
        headers = {"User-Agent": "sparkform-model-fetch/1", "Accept-Encoding": "identity"}
        if offset > 0:
            headers["Range"] = "bytes=%d-" % offset
        if token and origin_of(u) == origin:
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
        if length is not None and not (length.strip() and all(c in "0123456789" for c in length.strip())):
            raise Failure(
                EXIT_HTTP,
                "%s: the server sent a Content-Length that is not a number (%r); it is not a "
                "Hugging Face-compatible endpoint, or something in between rewrote the response"
                % (f["path"], length[:40]),
            )
        if length is not None and int(length) != size - have:
            raise Failure(
                EXIT_HTTP,
                "%s: the server announced %s bytes from offset %d, expected %d"
                % (f["path"], length, have, size - have),
            )
        done = have
        prog.begin(have)
        try:
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
                    if isinstance(e, OSError) and e.errno in NO_SPACE:
                        raise
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
        except OSError as e:
            if e.errno not in NO_SPACE:
                raise
            try:
                os.unlink(part)
            except OSError:
                pass
            raise Failure(
                EXIT_SPACE,
                "%s: %s at byte %d of %d under %s: the disk filled up during the download "
                "(something else is writing there); removed the .part, nothing was placed. Free "
                "up at least %d bytes (%s) there, then run up again."
                % (f["path"], os.strerror(e.errno), done, size, spec["dir"], size, human(size)),
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


# The references of a directory (native/lib/refstore.py, guard.sh's guard_refs layout):
# $HOME/.cache/sparkform/refs/<sha256 of the resolved path, 16 hex>/, with one empty
# `ref-<token>` per referencing resource. Beside them each ModelReplica's `files-<token>`: the
# paths its model lists (JSON), written by measure with "ref", read by remove.
def ref_token(spec):
    t = spec.get("ref")
    if t is None:
        return None
    if not isinstance(t, str) or not t or any(c not in REF_CHARS for c in t):
        raise Failure(EXIT_GUARD, "refusing reference token %r: it is letters, digits and '-'" % (t,))
    return t


def record_list(spec, token):
    """TOKEN's file list beside its reference (only while that reference exists)."""
    refs = refs_dir(guarded_dir(spec["dir"], "reference"))
    if not os.path.exists(os.path.join(refs, "ref-" + token)):
        return
    dest = os.path.join(refs, "files-" + token)
    tmp = "%s.%d.tmp" % (dest, os.getpid())
    with open(tmp, "w") as fh:
        json.dump(sorted(f["path"] for f in spec["files"]), fh)
    os.replace(tmp, dest)


def listed_elsewhere(resolved, token):
    """(paths another reference lists, whether some other reference has no readable list)."""
    refs = refs_dir(resolved)
    try:
        names = os.listdir(refs)
    except FileNotFoundError:
        return set(), False
    listed, unknown = set(), False
    for name in names:
        if not name.startswith("ref-") or name[4:] == token:
            continue
        try:
            with open(os.path.join(refs, "files-" + name[4:])) as fh:
                paths = json.load(fh)
            if not isinstance(paths, list):
                raise ValueError("not a list")
            listed.update(p for p in paths if isinstance(p, str))
        except (OSError, ValueError):
            unknown = True
    return listed, unknown


def cmd_measure(spec):
    token = ref_token(spec)
    if token is not None:
        record_list(spec, token)
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
    removed, kept = [], []
    root = guarded_dir(spec["root"], "delete from")
    resolved = guarded_dir(spec["dir"], "delete from")
    listed, unknown = listed_elsewhere(resolved, ref_token(spec))
    for f in spec["files"]:
        dest = dest_of(spec, f)
        if unknown or f["path"] in listed:
            kept.append(f["path"])
            continue
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
    emit("result", {"removed": removed, "kept": kept})


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
