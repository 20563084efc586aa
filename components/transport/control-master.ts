// The per-process private directory that holds what ssh needs on disk: pinned known_hosts
// files, copies of secret private keys, ControlMaster sockets. Each NodeConnection
// (node-connection.ts) writes its own files here once and removes them when it closes; the
// directory itself goes when the last connection of the process closes (closeAll). Safe to
// lose: a fresh process makes a new one, and masters of a lost one exit after ControlPersist.
//
// Everything lives in ONE private 0700 directory directly under /tmp (not os.tmpdir():
// on macOS that is /var/folders/…/T/, and a unix socket path must stay under ~104 bytes,
// including the 17-character suffix ssh appends while it sets up a master).

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { childEnv } from "./child-env";

/** Longest ControlPath we hand to ssh: 104 (macOS sun_path) minus ssh's temporary suffix. */
const MAX_CONTROL_PATH = 104 - 18;

let dir: string | undefined;

function baseDir(): string {
  // /tmp exists on every Unix we target and keeps socket paths short.
  return fs.existsSync("/tmp") ? "/tmp" : os.tmpdir();
}

/** The process's private directory, created 0700 on first use. */
export function sessionDir(): string {
  if (dir && fs.existsSync(dir)) return dir;
  dir = fs.mkdtempSync(path.join(baseDir(), "sf-"));
  fs.chmodSync(dir, 0o700);
  return dir;
}

/** Delete the private directory and everything left in it. Idempotent. */
export function removeSessionDir(): void {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
}

let tmpCounter = 0;

/** Write `content` to `file` as 0600, atomically (a rename), and only when it changed. */
export function writePrivate(file: string, content: string): void {
  // ssh processes of an earlier connection may still read the file: never truncate it in
  // place. Write a 0600 temporary file and rename it over the old one.
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

/** `p` as a ControlPath, checked against the unix-socket length limit. */
export function checkedControlPath(p: string): string {
  if (Buffer.byteLength(p) > MAX_CONTROL_PATH) {
    throw new Error(
      `ControlPath ${p} is ${Buffer.byteLength(p)} bytes; unix socket paths must stay under ${MAX_CONTROL_PATH}`,
    );
  }
  return p;
}

/**
 * Ask the master at `controlPath` to stop (`ssh -O exit`, no network round trip). `argv` is
 * the ssh argv that names the master, minus `-O exit`. Synchronous, because it also runs from
 * `process.on("exit")`, where nothing asynchronous completes.
 */
export function endMaster(controlPath: string, argv: readonly string[]): void {
  if (!fs.existsSync(controlPath)) return;
  const [cmd, ...args] = argv;
  if (cmd === undefined) return;
  spawnSync(cmd, ["-O", "exit", ...args], { stdio: "ignore", timeout: 5000, env: childEnv() });
}
