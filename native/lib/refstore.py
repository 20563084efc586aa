# refstore.py — native/lib/guard.sh's reference store, as the Python programs keep it:
# ~/.cache/sparkform/refs/<sha256 of the entry's path, 16 hex>/ holding `path` (for people),
# `created` (sparkform made the entry) and one empty `ref-<token>` per resource that uses it.
# An entry is deletable only when sparkform created it and no reference is left: what another
# stack, or the software itself, wrote is never sparkform's to delete.
# Imported by native/rpc-worker/prewarm.py, prune.py and native/model/model-fetch.py; inlined in
# place of the import when a program is sent to a node (components/native-script.ts).
import hashlib
import os
import pwd


def refs_dir(entry):
    """The reference directory of `entry` (a resolved path): guard.sh's guard_refs."""
    # $HOME as the login gave it; the account's home when it is unset or empty (a bare
    # environment), where expanduser("~") would give a relative or root path.
    home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    digest = hashlib.sha256(entry.encode()).hexdigest()[:16]
    return os.path.join(home, ".cache", "sparkform", "refs", digest)


def ref_add(entry, token, created):
    d = refs_dir(entry)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "path"), "w") as f:
        f.write(entry + "\n")
    if created:
        open(os.path.join(d, "created"), "a").close()
    open(os.path.join(d, f"ref-{token}"), "a").close()


def forget(entry):
    """Drop the entry's record (`path`, `created`) and its directory once nothing else is in it."""
    d = refs_dir(entry)
    for n in ("path", "created"):
        try:
            os.unlink(os.path.join(d, n))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(d)
    except OSError:
        pass


def ref_drop(entry, token, retain=False):
    """Drop token's reference: (references left, sparkform created the entry). With `retain`,
    an entry sparkform created keeps its record (`path`, `created`) with no reference left."""
    d = refs_dir(entry)
    try:
        os.unlink(os.path.join(d, f"ref-{token}"))
    except FileNotFoundError:
        pass
    try:
        left = sum(1 for n in os.listdir(d) if n.startswith("ref-"))
    except FileNotFoundError:
        return 0, False
    created = os.path.exists(os.path.join(d, "created"))
    if left == 0 and not (retain and created):
        forget(entry)
    return left, created


def deletable(entry):
    """guard.sh's rule: sparkform created the entry and no resource references it."""
    try:
        names = os.listdir(refs_dir(entry))
    except OSError:
        return False
    return "created" in names and not any(n.startswith("ref-") for n in names)
