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
# Only files whose SHA-256 equals the configured one are used (fail closed). Entries this
# program wrote are listed in MANIFEST; those no configured model references any more are
# removed (entries the server wrote itself are not touched). FNV-1a is a byte-serial chain, so
# a small C helper (compiled on first use with the node's cc) hashes and copies each range.
# Arguments: CACHE_DIR MANIFEST THRESHOLD [FILE SHA256]...   Output: one JSON line.
import hashlib
import json
import os
import struct
import subprocess
import sys

HELPER_C = r"""
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char **argv) {
  if (argc != 5) return 2;
  const char *src = argv[1], *dir = argv[4];
  long long off = atoll(argv[2]), len = atoll(argv[3]);
  char tmp[4096], dst[4096];
  snprintf(tmp, sizeof tmp, "%s/.sparkform-tmp-%d", dir, (int)getpid());
  int in = open(src, O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
  if (rename(tmp, dst) != 0) { perror("rename"); unlink(tmp); return 1; }
  printf("%016llx\n", (unsigned long long)h);
  return 0;
}
"""

# ggml type -> (block size, bytes per block), from ggml.c's type_traits at 80fb11ac. A type not
# listed is not pre-warmed (never guessed); sizes are also checked against the file's layout.
TYPES = {
    0: (1, 4), 1: (1, 2), 30: (1, 2), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36), 39: (32, 17),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


class Reader:
    def __init__(self, f):
        self.f = f

    def u(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack("<" + fmt, self.f.read(size))[0]

    def string(self):
        return self.f.read(self.u("Q")).decode("utf-8", "replace")

    def value(self, t):
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in scalar:
            return self.u(scalar[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u("I"), self.u("Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"unknown GGUF value type {t}")


def tensors(path):
    """(name, absolute offset, nbytes or None, why) for every tensor of a GGUF file."""
    with open(path, "rb") as f:
        r = Reader(f)
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = r.u("I")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        n_tensors, n_kv = r.u("Q"), r.u("Q")
        alignment = 32
        for _ in range(n_kv):
            key = r.string()
            v = r.value(r.u("I"))
            if key == "general.alignment":
                alignment = int(v)
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.u("Q") for _ in range(r.u("I"))]
            infos.append((name, dims, r.u("I"), r.u("Q")))
        pos = f.tell()
        data = (pos + alignment - 1) // alignment * alignment
    size = os.path.getsize(path)
    ordered = sorted(infos, key=lambda t: t[3])
    out = []
    for i, (name, dims, typ, off) in enumerate(ordered):
        # Where the next tensor starts (relative to the data section); the file's end for the last.
        end = ordered[i + 1][3] if i + 1 < len(ordered) else size - data
        if typ not in TYPES:
            out.append((name, data + off, None, f"ggml type {typ} is not known here"))
            continue
        blck, tsize = TYPES[typ]
        n = 1
        for d in dims:
            n *= d
        nbytes = n // blck * tsize
        # The next tensor starts at most alignment - 1 padding bytes after this one ends.
        if not (end - alignment < off + nbytes <= end):
            out.append((name, data + off, None, f"size {nbytes} does not fit the layout"))
            continue
        out.append((name, data + off, nbytes, ""))
    return out


def helper(state):
    tag = hashlib.sha256(HELPER_C.encode()).hexdigest()[:12]
    exe = os.path.join(state, f"fnv-copy-{tag}")
    if not os.access(exe, os.X_OK):
        src = exe + ".c"
        with open(src, "w") as f:
            f.write(HELPER_C)
        subprocess.run(["cc", "-O2", "-o", exe + ".tmp", src], check=True)
        os.replace(exe + ".tmp", exe)
        os.unlink(src)
    return exe


def main(argv):
    cache, manifest_path, threshold = os.path.expanduser(argv[0]), os.path.expanduser(argv[1]), int(argv[2])
    pairs = list(zip(argv[3::2], argv[4::2]))
    os.makedirs(cache, exist_ok=True)
    state = os.path.dirname(manifest_path)
    os.makedirs(state, exist_ok=True)
    try:
        old = json.load(open(manifest_path))
    except (OSError, ValueError):
        old = {"entries": {}}
    entries, written, reused, skipped, byts = {}, 0, 0, [], 0
    for path, want in pairs:
        path = os.path.expanduser(path)
        got = sha256(path)
        if got != want:
            print(json.dumps({"error": f"{path} has sha256 {got}, expected {want}: nothing was written from it"}))
            return 3
        exe = None
        for name, off, nbytes, why in tensors(path):
            if nbytes is None:
                skipped.append(f"{name}: {why}")
                continue
            if nbytes <= threshold:
                continue
            key = f"{want}:{name}"
            known = next((h for h, e in old["entries"].items() if key in e.get("refs", [])), None)
            cached = os.path.join(cache, known) if known else None
            if known and cached and os.path.exists(cached) and os.path.getsize(cached) == nbytes:
                h = known
                reused += 1
            else:
                exe = exe or helper(state)
                r = subprocess.run([exe, path, str(off), str(nbytes), cache], capture_output=True, text=True, check=True)
                h = r.stdout.strip()
                written += 1
            e = entries.setdefault(h, {"size": nbytes, "refs": []})
            e["refs"].append(key)
            byts += nbytes
    pruned = 0
    for h in old["entries"]:
        if h not in entries:
            try:
                os.unlink(os.path.join(cache, h))
                pruned += 1
            except FileNotFoundError:
                pass
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"entries": entries}, f)
    os.replace(tmp, manifest_path)
    if not entries:
        os.unlink(manifest_path)
    print(json.dumps({"entries": len(entries), "written": written, "reused": reused, "pruned": pruned, "bytes": byts, "skipped": skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
