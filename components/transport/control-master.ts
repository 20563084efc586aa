// The per-process registry of ssh ControlMasters and the private files ssh needs
// (pinned known_hosts, secret private keys). Safe to lose: a fresh process builds a new
// one, and masters of a lost one exit by themselves after ControlPersist.
//
// Everything lives in ONE private 0700 directory directly under /tmp (not os.tmpdir():
// on macOS that is /var/folders/…/T/, and a unix socket path must stay under ~104 bytes,
// including the 17-character suffix ssh appends while it sets up a master).

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { hostKeyAlias, knownHostsLine, type SshTarget } from "./connection";

/** Longest ControlPath we hand to ssh: 104 (macOS sun_path) minus ssh's temporary suffix. */
const MAX_CONTROL_PATH = 104 - 18;

interface Session {
  readonly dir: string;
  /** ControlPath → destination argv prefix used to send `-O exit` on close. */
  readonly masters: Map<string, string[]>;
}

let session: Session | undefined;

function baseDir(): string {
  // /tmp exists on every Unix we target and keeps socket paths short.
  return fs.existsSync("/tmp") ? "/tmp" : os.tmpdir();
}

/** The run's private directory, created 0700 on first use. */
export function sessionDir(): string {
  if (session && fs.existsSync(session.dir)) return session.dir;
  const dir = fs.mkdtempSync(path.join(baseDir(), "sf-"));
  fs.chmodSync(dir, 0o700);
  session = { dir, masters: new Map() };
  return dir;
}

/** A short stable tag for a connection identity: same node spec → same files and socket. */
function tag(t: Pick<SshTarget, "name" | "host" | "port" | "user" | "hostKey">): string {
  return createHash("sha256")
    .update(JSON.stringify([t.name, t.host, t.port, t.user, t.hostKey]))
    .digest("hex")
    .slice(0, 10);
}

let tmpCounter = 0;

function writePrivate(file: string, content: string): void {
  // Many commands to one node run at once (refresh reads every resource in parallel), and each
  // asks for this file while ssh processes read it: never truncate it in place. Write a 0600
  // temporary file and rename it over the old one, and only when the content changed.
  try {
    if (fs.readFileSync(file, "utf8") === content) return;
  } catch {
    // not there yet
  }
  const tmp = `${file}.${process.pid}.${++tmpCounter}`;
  fs.writeFileSync(tmp, content, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
}

/** The known_hosts file holding exactly the pinned key of `t` (or of its jump host). */
export function knownHostsFile(t: SshTarget, role: "node" | "jump" = "node"): string {
  const dir = sessionDir();
  const file = path.join(dir, `kh-${tag(t)}${role === "jump" ? "-j" : ""}`);
  const key = role === "node" ? t.hostKey : (t.jump?.hostKey ?? "");
  writePrivate(file, knownHostsLine(hostKeyAlias(t.name, role), key));
  return file;
}

/** The 0600 file holding `t.privateKey`, or undefined when the spec has none. */
export function privateKeyFile(t: SshTarget): string | undefined {
  if (t.privateKey === undefined) return undefined;
  const file = path.join(sessionDir(), `id-${tag(t)}`);
  // ssh rejects a key file without a trailing newline in some formats.
  writePrivate(file, t.privateKey.endsWith("\n") ? t.privateKey : `${t.privateKey}\n`);
  return file;
}

/** The ControlPath for `t`, checked against the unix-socket length limit. */
export function controlPath(t: SshTarget): string {
  const p = path.join(sessionDir(), `c-${tag(t)}`);
  if (Buffer.byteLength(p) > MAX_CONTROL_PATH) {
    throw new Error(
      `ControlPath ${p} is ${Buffer.byteLength(p)} bytes; unix socket paths must stay under ${MAX_CONTROL_PATH}`,
    );
  }
  return p;
}

/** Remember a master so `closeMasters` can end it. `exitArgv` is the full ssh argv minus `-O exit`. */
export function registerMaster(controlPathValue: string, exitArgv: string[]): void {
  sessionDir();
  session?.masters.set(controlPathValue, exitArgv);
}

function endMastersSync(): void {
  if (!session) return;
  for (const [cp, argv] of session.masters) {
    if (!fs.existsSync(cp)) continue;
    const [cmd, ...args] = argv;
    if (cmd === undefined) continue;
    // `-O exit` asks the master to stop; it needs no network round trip.
    spawnSync(cmd, ["-O", "exit", ...args], { stdio: "ignore", timeout: 5000 });
  }
  session.masters.clear();
}

/**
 * End every master this process started and delete the private directory (pinned
 * known_hosts files, private key copies, sockets). Idempotent; the next call starts afresh.
 */
export function closeMasters(): void {
  endMastersSync();
  if (session) fs.rmSync(session.dir, { recursive: true, force: true });
  session = undefined;
}

// A dynamic-provider process may end without calling close(): still remove the key copies.
process.once("exit", closeMasters);
