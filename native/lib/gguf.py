# gguf.py — a GGUF file's tensor table, read with every length checked before anything is read
# or skipped: a program runs beside a worker on a unified-memory node, where an OOM takes
# unrelated services with it, so a hostile or broken header must cost kilobytes, not the size it
# claims. Imported by native/rpc-worker/prewarm.py; inlined in place of the import when a program
# is sent to a node (components/native-script.ts).
import os
import struct


# ggml type -> (block size, bytes per block), from ggml.c's type_traits at 80fb11ac. A type not
# listed is not pre-warmed (never guessed); sizes are also checked against the file's layout.
TYPES = {
    0: (1, 4), 1: (1, 2), 30: (1, 2), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36), 39: (32, 17),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
}

# Header bounds. The control node's reader (@huggingface/gguf, components/model/resolve.ts)
# refuses more than 1e5 keys, strings over 1e7 bytes, arrays over 1e6 elements or nested
# deeper than 4, dimensions over 2^32, and reads at most 50 MB of header; llama.cpp's own
# reader (gguf.cpp) refuses more than 4 dimensions, tensor names of 64 bytes or more, and an
# alignment that is not a power of two. Tensors: the control side allows 1e7, which would be
# gigabytes of tensor infos here; real models have a few thousand (Qwen3-235B: 1,131).
MAX_KV = 100_000
MAX_STRING = 10_000_000
MAX_ARRAY = 1_000_000
MAX_ARRAY_DEPTH = 4
MAX_HEADER = 64 * 2**20
MAX_TENSORS = 65_536
MAX_NAME = 63
MAX_DIMS = 4
MAX_DIM = 2**32
SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4


class GgufError(ValueError):
    pass


class Header:
    """Reads a GGUF header with every length checked before anything is read or skipped."""

    def __init__(self, f, size):
        self.f, self.pos, self.end = f, 0, min(size, MAX_HEADER)
        self.size = size

    def take(self, n, what):
        self.room(n, what)
        b = self.f.read(n)
        if len(b) != n:
            raise GgufError(f"{what} at byte {self.pos}: the file ended")
        self.pos += n
        return b

    def skip(self, n, what):
        self.room(n, what)
        self.f.seek(n, 1)
        self.pos += n

    def room(self, n, what):
        if self.pos + n > self.end:
            where = "the end of the file" if self.end == self.size else f"the {MAX_HEADER}-byte header limit"
            raise GgufError(f"{what} at byte {self.pos} ({n} bytes) runs past {where}")

    def u32(self, what):
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what):
        return struct.unpack("<Q", self.take(8, what))[0]

    def strlen(self, what):
        n = self.u64(f"{what}'s length")
        if n > MAX_STRING:
            raise GgufError(f"{what} is {n} bytes long, over the {MAX_STRING} bytes a header string may have")
        return n

    def skip_value(self, t, what, depth=0):
        if t in SCALARS:
            self.skip(SCALARS[t], what)
        elif t == STRING:
            self.skip(self.strlen(what), what)
        elif t == ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise GgufError(f"{what} nests arrays deeper than {MAX_ARRAY_DEPTH}")
            et, n = self.u32(f"{what}'s element type"), self.u64(f"{what}'s length")
            if n > MAX_ARRAY:
                raise GgufError(f"{what} is an array of {n} elements, over the {MAX_ARRAY} allowed")
            if et in SCALARS:
                # Skipped, never built: a header's arrays (the vocabulary) are not needed here.
                self.skip(n * SCALARS[et], what)
            elif et in (STRING, ARRAY):
                for _ in range(n):
                    self.skip_value(et, what, depth + 1)
            else:
                raise GgufError(f"{what} is an array of unknown GGUF type {et}")
        else:
            raise GgufError(f"{what} has unknown GGUF type {t}")


def tensors(path):
    """(name, absolute offset, nbytes or None, why) for every tensor of a GGUF file."""
    size = os.path.getsize(path)
    with open(path, "rb", buffering=1 << 20) as f:
        r = Header(f, size)
        if r.take(4, "the magic") != b"GGUF":
            raise GgufError("it is not a GGUF file (no GGUF magic)")
        version = r.u32("the version")
        if version not in (2, 3):
            raise GgufError(f"GGUF version {version} is not supported (2 and 3 are)")
        n_tensors, n_kv = r.u64("the tensor count"), r.u64("the key count")
        if n_tensors > MAX_TENSORS:
            raise GgufError(f"it declares {n_tensors} tensors, over the {MAX_TENSORS} allowed")
        if n_kv > MAX_KV:
            raise GgufError(f"it declares {n_kv} metadata keys, over the {MAX_KV} allowed")
        alignment = 32
        for i in range(n_kv):
            n = r.strlen(f"key {i}")
            key = r.take(n, f"key {i}") if n == len(b"general.alignment") else r.skip(n, f"key {i}")
            t = r.u32(f"key {i}'s type")
            if key == b"general.alignment":
                if t != UINT32:
                    raise GgufError(f"general.alignment has GGUF type {t}; llama.cpp reads it as uint32 (type 4)")
                alignment = r.u32("general.alignment")
                if alignment == 0 or alignment & (alignment - 1):
                    raise GgufError(f"general.alignment {alignment} is not a power of two")
            else:
                r.skip_value(t, f"the value of key {i}")
        infos = []
        for i in range(n_tensors):
            n = r.strlen(f"tensor {i}'s name")
            if n > MAX_NAME:
                raise GgufError(f"tensor {i}'s name is {n} bytes, over llama.cpp's {MAX_NAME}")
            name = r.take(n, f"tensor {i}'s name").decode("utf-8", "replace")
            n_dims = r.u32(f"tensor {name}'s dimension count")
            if n_dims > MAX_DIMS:
                raise GgufError(f"tensor {name} has {n_dims} dimensions, over ggml's {MAX_DIMS}")
            count = 1
            for d in range(n_dims):
                dim = r.u64(f"tensor {name}'s dimension {d}")
                if dim > MAX_DIM:
                    raise GgufError(f"tensor {name}'s dimension {d} is {dim}, over {MAX_DIM}")
                count *= dim
            typ, off = r.u32(f"tensor {name}'s type"), r.u64(f"tensor {name}'s offset")
            if off % alignment:
                raise GgufError(f"tensor {name}'s offset {off} is not a multiple of the alignment {alignment}")
            infos.append((name, count, typ, off))
        data = (r.pos + alignment - 1) // alignment * alignment
    if data > size:
        raise GgufError(f"its tensor data would start at byte {data}, past the end of the {size}-byte file")
    ordered = sorted(infos, key=lambda t: t[3])
    out = []
    for i, (name, count, typ, off) in enumerate(ordered):
        if data + off > size:
            raise GgufError(f"tensor {name} starts at byte {data + off}, past the end of the {size}-byte file")
        # Where the next tensor starts (relative to the data section); the file's end for the last.
        end = ordered[i + 1][3] if i + 1 < len(ordered) else size - data
        if typ not in TYPES:
            out.append((name, data + off, None, f"ggml type {typ} is not known here"))
            continue
        blck, tsize = TYPES[typ]
        nbytes = count // blck * tsize
        # The next tensor starts at most alignment - 1 padding bytes after this one ends.
        if not (end - alignment < off + nbytes <= end):
            out.append((name, data + off, None, f"size {nbytes} does not fit the layout"))
            continue
        out.append((name, data + off, nbytes, ""))
    return out
