# Runs on a worker node: pre-warm ggml-rpc-server's tensor cache from the node's own copy of
# the model, so the client's first load sends hashes instead of weights over the fabric.
#
# What the bundled llama.cpp (80fb11ac) does, read from its source:
#   client  ggml_backend_rpc_buffer_set_tensor (ggml-rpc.cpp): for size > HASH_THRESHOLD
#           (10 MiB, strictly greater) it sends SET_TENSOR_HASH with fnv_hash(data, size): 64-bit
#           FNV-1a (basis 0xcbf29ce484222325, prime 0x100000001b3, xor then multiply) of exactly
#           the bytes it is setting; on a hit it sends nothing more.
#   loader  llama-model-loader.cpp load_all_data: an RPC buffer has no async/events, so each
#           tensor is set whole, ggml_backend_tensor_set(cur, data, 0, n_size), with the bytes
#           as stored in the GGUF (n_size = ggml_nbytes): one hash per whole tensor, no chunks.
#   server  the cache is $LLAMA_CACHE/rpc/ (else $XDG_CACHE_HOME/llama.cpp/rpc/, else
#           ~/.cache/llama.cpp/rpc/), one file per tensor named "%016" PRIx64 of that hash; a hit
#           reads the whole file and sets it, with no check of its content (a truncated entry
#           is silently wrong weights: upstream #28789), so entries here are written to a
#           temporary name, fsync'd and renamed.
# Only files whose SHA-256 equals the configured one are used (fail closed), and only after
# every configured file's header passed the bounds of native/lib/gguf.py (why they are there).
#
# Ownership: MANIFEST lists the entries this worker (one manifest per worker port) uses; the
# references that decide a deletion are kept per entry in native/lib/guard.sh's store
# (~/.cache/sparkform/refs/<sha256 of the entry's path, 16 hex>/: `path`, `created`, one
# `ref-<token>` per manifest). An entry is "created" only when this program made the name
# (link, which fails on an existing name): an entry the server wrote itself, or another worker
# made, is referenced but never claimed. Prune drops this manifest's reference and deletes an
# entry only when sparkform created it and no reference is left. Names are exactly 16 hex
# digits (the server's naming); anything else in a manifest is ignored, never deleted.
# Manifests live in their own directory (not the worker's state directory, which stop.sh
# cleans); manifests an older sparkform left in ~/.cache/sparkform/rpc-worker are moved here
# first, with their entries referenced, so none is orphaned by the upgrade.
# FNV-1a is a byte-serial chain, so a small C helper (compiled on first use with the node's cc)
# hashes and copies each range.
# --retain (under a cache bound): an entry sparkform created that this run's prune leaves with no
# reference is kept, recorded as created and unreferenced, for prune.py to delete least recently
# used first when the cache is over its bound (a swap back to that model finds it); without it,
# it is deleted here (destroy, no bound).
# Arguments: [--retain] CACHE_DIR MANIFEST THRESHOLD [FILE SHA256]...
# Output: one JSON line, the summary, or {"error": …} with exit 3 (nothing written or pruned).
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from gguf import GgufError, tensors  # noqa: E402
from nodefs import file_sha256  # noqa: E402
from refstore import ref_add, ref_drop  # noqa: E402

HELPER_C = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
/* Prints "<hash> created" (the name was new), "existed" (an entry of this size was there:
   left as it is) or "replaced" (one of another size was there: a damaged entry, replaced). */
int main(int argc, char **argv) {
  if (argc != 5) return 2;
  const char *src = argv[1], *dir = argv[4];
  long long off = atoll(argv[2]), len = atoll(argv[3]);
  char tmp[4096], dst[4096];
  snprintf(tmp, sizeof tmp, "%s/.sparkform-tmp-%d", dir, (int)getpid());
  unlink(tmp);
  int in = open(src, O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (in < 0 || out < 0) { perror("open"); return 1; }
  static unsigned char buf[1 << 20];
  uint64_t h = 0xcbf29ce484222325ULL;
  long long done = 0;
  while (done < len) {
    long long want = len - done < (long long)sizeof buf ? len - done : (long long)sizeof buf;
    ssize_t n = pread(in, buf, want, off + done);
    if (n <= 0) { fprintf(stderr, "short read at %lld\n", off + done); unlink(tmp); return 1; }
    for (ssize_t i = 0; i < n; i++) { h ^= buf[i]; h *= 0x100000001b3ULL; }
    for (ssize_t w = 0; w < n;) { ssize_t k = write(out, buf + w, n - w); if (k <= 0) { perror("write"); unlink(tmp); return 1; } w += k; }
    done += n;
  }
  if (fsync(out) != 0 || close(out) != 0) { perror("fsync"); unlink(tmp); return 1; }
  snprintf(dst, sizeof dst, "%s/%016llx", dir, (unsigned long long)h);
  const char *how = "created";
  if (link(tmp, dst) != 0) {
    struct stat st;
    if (errno == EEXIST && lstat(dst, &st) == 0) {
      if (S_ISREG(st.st_mode) && st.st_size != len) {
        if (rename(tmp, dst) != 0) { perror("rename"); unlink(tmp); return 1; }
        printf("%016llx replaced\n", (unsigned long long)h);
        return 0;
      }
      how = "existed";
    } else if (errno == EEXIST || lstat(dst, &st) == 0) {
      how = "existed";
    } else if (rename(tmp, dst) != 0) { /* no hard links on this filesystem */
      perror("rename"); unlink(tmp); return 1;
    } else {
      printf("%016llx created\n", (unsigned long long)h);
      return 0;
    }
  }
  unlink(tmp);
  printf("%016llx %s\n", (unsigned long long)h, how);
  return 0;
}
"""

# How many skipped tensors are named in the output (the rest are counted): it goes into state.
MAX_SKIPPED = 16

NAME = re.compile(r"[0-9a-f]{16}")
# Where sparkform before this version kept the manifests (stop.sh's directory).
LEGACY_DIR = "~/.cache/sparkform/rpc-worker"
LEGACY_MANIFEST = re.compile(r"prewarm-[0-9]+\.json")
HELPER = re.compile(r"fnv-copy-[0-9a-f]{12}(\.tmp|\.c)?")
MAX_MANIFEST = 64 * 2**20


def helper(state):
    tag = hashlib.sha256(HELPER_C.encode()).hexdigest()[:12]
    exe = os.path.join(state, f"fnv-copy-{tag}")
    if not os.access(exe, os.X_OK):
        src = exe + ".c"
        with open(src, "w") as f:
            f.write(HELPER_C)
        # stdout is the summary's alone: the compiler's chatter goes to stderr.
        subprocess.run(["cc", "-O2", "-o", exe + ".tmp", src], check=True, stdout=sys.stderr)
        os.replace(exe + ".tmp", exe)
        os.unlink(src)
    return exe


def token_of(manifest_path):
    """The reference a manifest holds: guard.sh's token alphabet (letters, digits, '-')."""
    stem = os.path.basename(manifest_path).removesuffix(".json")
    return "rpc-" + re.sub(r"[^A-Za-z0-9-]", "-", stem)


# ---- manifests ---------------------------------------------------------------------------------


def load_manifest(path):
    """{entry name: {"size", "refs"}}; names that are not 16 hex digits are dropped."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_MANIFEST + 1)
        old = json.loads(raw) if len(raw) <= MAX_MANIFEST else {}
    except (OSError, ValueError):
        return {}
    entries = old.get("entries") if isinstance(old, dict) else None
    if not isinstance(entries, dict):
        return {}
    out = {}
    for h, e in entries.items():
        if not NAME.fullmatch(h) or not isinstance(e, dict):
            print(f"prewarm: ignored manifest entry {h[:80]!r} in {path}: not a cache entry name", file=sys.stderr)
            continue
        refs = [r for r in e.get("refs", []) if isinstance(r, str)] if isinstance(e.get("refs"), list) else []
        out[h] = {"size": e.get("size") if isinstance(e.get("size"), int) else 0, "refs": refs}
    return out


def save_manifest(path, entries):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"entries": entries}, f)
    os.replace(tmp, path)


def migrate(state, cache):
    """Move the manifests an older sparkform kept in LEGACY_DIR here, referencing their entries."""
    legacy = os.path.expanduser(LEGACY_DIR)
    if not os.path.isdir(legacy) or os.path.realpath(legacy) == os.path.realpath(state):
        return
    for n in sorted(os.listdir(legacy)):
        p = os.path.join(legacy, n)
        if LEGACY_MANIFEST.fullmatch(n):
            dst = os.path.join(state, n)
            entries = load_manifest(dst)
            token = token_of(dst)
            for h, e in load_manifest(p).items():
                if h in entries or not os.path.isfile(os.path.join(cache, h)):
                    continue
                # The older program wrote these (it could not tell an entry it found): its claim stands.
                ref_add(os.path.join(cache, h), token, True)
                entries[h] = e
            if entries:
                save_manifest(dst, entries)
            os.unlink(p)
        elif HELPER.fullmatch(n):
            os.unlink(p)
    try:
        os.rmdir(legacy)
    except OSError:
        pass  # the worker's logs and guard are still there: stop.sh's


def main(argv):
    retain = bool(argv) and argv[0] == "--retain"
    argv = argv[1:] if retain else argv
    cache, manifest_path, threshold = os.path.expanduser(argv[0]), os.path.expanduser(argv[1]), int(argv[2])
    pairs = list(zip(argv[3::2], argv[4::2]))
    os.makedirs(cache, exist_ok=True)
    cache = os.path.realpath(cache)
    # One pre-warm at a time per cache: the references of two workers' runs must not interleave.
    lock = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    state = os.path.dirname(os.path.abspath(manifest_path))
    os.makedirs(state, exist_ok=True)
    migrate(state, cache)
    old = load_manifest(manifest_path)
    token = token_of(manifest_path)
    known = {key: h for h, e in old.items() for key in e["refs"]}

    # Every file checked before anything is written: a refusal leaves the cache as it was.
    plans = []
    for path, want in pairs:
        path = os.path.expanduser(path)
        got = file_sha256(path)
        if got != want:
            return {"error": f"{path} has sha256 {got}, expected {want}: nothing was written from it"}
        try:
            plans.append((path, want, tensors(path)))
        except (GgufError, OSError) as e:
            return {
                "error": f"{path} (sha256 {want[:12]}) has a GGUF header sparkform will not read: {e}. "
                "llama.cpp cannot load it either; nothing was pre-warmed or pruned. Check the model's "
                "repo and revision (sparkform:model) and re-download it."
            }

    entries, written, reused, skipped, byts = {}, 0, 0, [], 0
    exe = None
    try:
        for path, want, infos in plans:
            for name, off, nbytes, why in infos:
                if nbytes is None:
                    skipped.append(f"{name}: {why}")
                    continue
                if nbytes <= threshold:
                    continue
                key = f"{want}:{name}"
                h = known.get(key)
                cached = os.path.join(cache, h) if h else None
                if cached and os.path.isfile(cached) and os.path.getsize(cached) == nbytes:
                    reused += 1
                    created = False
                else:
                    exe = exe or helper(state)
                    r = subprocess.run([exe, path, str(off), str(nbytes), cache], capture_output=True, text=True, check=True)
                    h, how = r.stdout.split()
                    if how == "existed":
                        reused += 1
                    else:
                        written += 1
                    created = how == "created"
                ref_add(os.path.join(cache, h), token, created)
                e = entries.setdefault(h, {"size": nbytes, "refs": []})
                e["refs"].append(key)
                byts += nbytes
    except BaseException:
        # What is referenced stays listed, so a later prune can still drop it.
        save_manifest(manifest_path, {**old, **entries})
        raise

    pruned, retained = 0, 0
    for h in old:
        if h in entries:
            continue
        left, created = ref_drop(os.path.join(cache, h), token, retain)
        if left == 0 and created and retain:
            retained += 1
        elif left == 0 and created:
            try:
                os.unlink(os.path.join(cache, h))
                pruned += 1
            except FileNotFoundError:
                pass
    if entries:
        save_manifest(manifest_path, entries)
    else:
        try:
            os.unlink(manifest_path)
        except FileNotFoundError:
            pass
        if not any(n.endswith(".json") for n in os.listdir(state)):
            # The last manifest is gone: so are this program's helper and its directory.
            for n in os.listdir(state):
                if HELPER.fullmatch(n):
                    os.unlink(os.path.join(state, n))
            try:
                os.rmdir(state)
            except OSError:
                pass
    if len(skipped) > MAX_SKIPPED:
        skipped = skipped[:MAX_SKIPPED] + [f"... and {len(skipped) - MAX_SKIPPED} more tensors skipped"]
    out = {"entries": len(entries), "written": written, "reused": reused, "pruned": pruned, "bytes": byts, "skipped": skipped}
    if retain:
        out["retained"] = retained
    return out


if __name__ == "__main__":
    out = main(sys.argv[1:])
    print(json.dumps(out))
    sys.exit(3 if "error" in out else 0)
