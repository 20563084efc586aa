// Node containers: a writable root over the cached image, systemd-nspawn booted detached in the
// node's network namespace and its own cgroup, exec via nsenter, clean poweroff.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { run, runRaw, sleep, type RunResult } from "./exec";
import { ensureDir } from "./paths";
import type { NodeRuntime, SimState } from "./state";

// ---------- roots ----------

export function overlaySupported(): boolean {
  try {
    return /\toverlay$/m.test(fs.readFileSync("/proc/filesystems", "utf8"));
  } catch {
    return false;
  }
}

/** Mounts (overlay) or copies (`cp --reflink=auto -a`) the image as the node's own root. */
export async function prepareRoot(s: SimState, n: NodeRuntime): Promise<void> {
  ensureDir(n.root);
  if (s.rootMode === "overlay" && n.upper && n.work) {
    ensureDir(n.upper);
    ensureDir(n.work);
    const r = await runRaw("mount", [
      "-t",
      "overlay",
      n.machine, // the mount's source names it: `sim down` finds orphans by this
      "-o",
      `lowerdir=${s.imageRootfs},upperdir=${n.upper},workdir=${n.work}`,
      n.root,
    ]);
    if (r.exitCode === 0) {
      n.mounted = true;
      return;
    }
    // e.g. the state dir is itself on overlayfs (a container): fall back to a copy.
    n.upper = undefined;
    n.work = undefined;
  }
  await run("cp", ["--reflink=auto", "-a", `${s.imageRootfs}/.`, n.root]);
}

export interface NodeFiles {
  hostname: string;
  hosts: string;
  authorizedKey: string;
}

/** Writes what makes a node itself into its root, before its first boot. */
/**
 * nspawn mounts the container's /sys before it joins the node's network namespace, so
 * /sys/class/net lists the host's interfaces (eth0, the sim's bridges) instead of the node's
 * (mgmt0, fabric0, fabric1), and the fact sheet reads the wrong MTUs. A sysfs mounted inside the
 * node belongs to its namespace: this unit mounts one read-only and binds its net directories
 * over the two that nspawn's show wrongly, before anything else starts.
 */
export const sysfsNetUnit = `[Unit]
Description=sparkform: /sys/class/net of this node's own network namespace
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target network-pre.target ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'mkdir -p /run/sparkform-sysfs && mount -t sysfs -o ro,nosuid,nodev,noexec sysfs /run/sparkform-sysfs && mount --bind /run/sparkform-sysfs/class/net /sys/class/net && mount --bind /run/sparkform-sysfs/devices/virtual/net /sys/devices/virtual/net'

[Install]
WantedBy=sysinit.target
`;

export function writeNodeFiles(n: NodeRuntime, f: NodeFiles): void {
  const r = n.root;
  const units = path.join(r, "etc/systemd/system");
  fs.mkdirSync(path.join(units, "sysinit.target.wants"), { recursive: true });
  fs.writeFileSync(path.join(units, "sparkform-sysfs-net.service"), sysfsNetUnit);
  const wants = path.join(units, "sysinit.target.wants", "sparkform-sysfs-net.service");
  fs.rmSync(wants, { force: true });
  fs.symlinkSync("../sparkform-sysfs-net.service", wants);
  fs.writeFileSync(path.join(r, "etc/hostname"), `${f.hostname}\n`);
  fs.writeFileSync(path.join(r, "etc/hosts"), f.hosts);
  fs.writeFileSync(path.join(r, "etc/machine-id"), `${randomBytes(16).toString("hex")}\n`);
  const ssh = path.join(r, "home/spark/.ssh");
  fs.mkdirSync(ssh, { recursive: true, mode: 0o700 });
  const ak = path.join(ssh, "authorized_keys");
  fs.writeFileSync(ak, `${f.authorizedKey.trim()}\n`, { mode: 0o600 });
  fs.chownSync(ssh, 1000, 1000);
  fs.chownSync(ak, 1000, 1000);
  fs.chmodSync(ssh, 0o700);
}

/** Unmounts a node's root (lazily if busy); returns whether something was unmounted. */
export async function releaseRoot(mountpoint: string): Promise<boolean> {
  if (!isMounted(mountpoint)) return false;
  const r = await runRaw("umount", [mountpoint]);
  if (r.exitCode !== 0) await runRaw("umount", ["-l", mountpoint]);
  return true;
}

interface MountInfo {
  source: string;
  target: string;
  fstype: string;
}

export function listMounts(): MountInfo[] {
  const text = fs.readFileSync("/proc/self/mountinfo", "utf8");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const parts = line.split(" ");
      const sep = parts.indexOf("-");
      const unesc = (x: string) =>
        x.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
      return {
        target: unesc(parts[4] ?? ""),
        fstype: parts[sep + 1] ?? "",
        source: unesc(parts[sep + 2] ?? ""),
      };
    });
}

export function isMounted(target: string): boolean {
  const t = path.resolve(target);
  return listMounts().some((m) => m.target === t);
}

// ---------- cgroups ----------

/**
 * Each container needs a cgroup of its own: with `--keep-unit` and no systemd on the host,
 * nspawn makes `payload`/`supervisor` under its current cgroup, so two containers started from
 * the same cgroup trample each other's units (status=219/CGROUP).
 */
export function cgroupDirs(machine: string): string[] {
  const roots: string[] = [];
  const base = "/sys/fs/cgroup";
  if (fs.existsSync(path.join(base, "cgroup.controllers"))) roots.push(base); // unified (v2)
  for (const h of ["systemd", "unified"]) {
    const d = path.join(base, h);
    if (fs.existsSync(path.join(d, "cgroup.procs"))) roots.push(d);
  }
  return roots.map((r) => path.join(r, "sparkform", machine));
}

/** Removes a container's cgroups (deepest first); they are empty once its processes are gone. */
export function removeCgroups(machine: string): void {
  for (const dir of cgroupDirs(machine)) {
    if (!fs.existsSync(dir)) continue;
    const dirs: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(d, e.name));
      }
      dirs.push(d);
    };
    try {
      walk(dir);
      for (const d of dirs) fs.rmdirSync(d);
    } catch {
      /* still busy: the next `down` gets it */
    }
  }
}

// ---------- processes ----------

export function pidAlive(pid: number | undefined): pid is number {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) Z /.test(stat); // a zombie is gone for our purposes
  } catch {
    return false;
  }
}

function cmdline(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

/** Every systemd-nspawn process on the host with its `--machine=` name. */
export function nspawnProcesses(): Array<{ pid: number; machine: string }> {
  const out: Array<{ pid: number; machine: string }> = [];
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    const argv = cmdline(Number(e));
    if (!argv[0] || path.basename(argv[0]) !== "systemd-nspawn") continue;
    const m = argv.find((a) => a.startsWith("--machine="));
    if (m) out.push({ pid: Number(e), machine: m.slice("--machine=".length) });
  }
  return out;
}

/** The nspawn process of this node, if it runs (checked by its machine name, not just the pid). */
export function nodePid(n: NodeRuntime): number | undefined {
  if (pidAlive(n.nspawnPid) && cmdline(n.nspawnPid).includes(`--machine=${n.machine}`)) {
    return n.nspawnPid;
  }
  return nspawnProcesses().find((p) => p.machine === n.machine)?.pid;
}

/** The container's PID 1 (a direct child of the nspawn process). */
export function leaderPid(nspawnPid: number): number | undefined {
  try {
    const kids = fs
      .readFileSync(`/proc/${nspawnPid}/task/${nspawnPid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    const own = fs.readlinkSync(`/proc/${nspawnPid}/ns/pid`);
    return kids.find((k) => {
      try {
        return fs.readlinkSync(`/proc/${k}/ns/pid`) !== own;
      } catch {
        return false;
      }
    });
  } catch {
    return undefined;
  }
}

/** Starts the node's container detached (its console goes to n.consoleLog); returns its pid. */
export function startContainer(n: NodeRuntime): number {
  ensureDir(path.dirname(n.consoleLog));
  for (const d of cgroupDirs(n.machine)) ensureDir(d);
  const log = fs.openSync(n.consoleLog, "a");
  const args = [
    "-D",
    n.root,
    "-b",
    "--register=no",
    "--keep-unit",
    `--network-namespace-path=/run/netns/${n.netns}`,
    `--machine=${n.machine}`,
    `--hostname=${n.name}`,
    "--resolv-conf=off",
    "--timezone=off",
    "--link-journal=no",
    "--console=read-only",
    "--kill-signal=SIGRTMIN+4", // poweroff
  ];
  // A shell puts itself into the container's cgroups, then becomes systemd-nspawn.
  const enter = cgroupDirs(n.machine)
    .map((d) => `echo $$ > '${d}/cgroup.procs'`)
    .join(" && ");
  const child = spawn(
    "/bin/sh",
    ["-c", `${enter || "true"} && exec systemd-nspawn "$@"`, "sh", ...args],
    {
      detached: true,
      stdio: ["ignore", log, log],
      env: {
        PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        LANG: "C.UTF-8",
      },
    },
  );
  child.unref();
  fs.closeSync(log);
  if (!child.pid) throw new Error(`sim: could not start systemd-nspawn for ${n.name}`);
  return child.pid;
}

const innerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export interface ExecOptions {
  input?: string;
  timeoutMs?: number;
  /** Run as this user (login environment: HOME, XDG_RUNTIME_DIR) instead of root. */
  user?: string;
}

/** Runs argv inside the node (all its namespaces, a clean environment). */
export async function execIn(
  leader: number,
  argv: readonly string[],
  opts: ExecOptions = {},
): Promise<RunResult> {
  const env = ["PATH=" + innerPath, "LANG=C.UTF-8", "TERM=dumb"];
  let cmd = [...argv];
  if (opts.user && opts.user !== "root") {
    const uid = opts.user === "spark" ? 1000 : undefined;
    env.push(`HOME=/home/${opts.user}`, `USER=${opts.user}`, `LOGNAME=${opts.user}`);
    if (uid !== undefined) env.push(`XDG_RUNTIME_DIR=/run/user/${uid}`);
    cmd = ["setpriv", "--reuid", opts.user, "--regid", opts.user, "--init-groups", "--", ...cmd];
  } else {
    env.push("HOME=/root", "USER=root", "LOGNAME=root");
  }
  const r = await runRaw(
    "nsenter",
    ["-t", String(leader), "-a", "--", "/usr/bin/env", "-i", ...env, ...cmd],
    { input: opts.input, timeoutMs: opts.timeoutMs },
  );
  return { stdout: r.stdout, stderr: r.stderr, exitCode: r.timedOut ? 124 : r.exitCode };
}

/** Waits until the node's systemd finished booting and sshd has its host key and runs. */
export async function waitBooted(
  n: NodeRuntime,
  nspawnPid: number,
  timeoutMs = 120_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let leader: number | undefined;
  while (!leader) {
    if (!pidAlive(nspawnPid)) throw bootFailure(n, "systemd-nspawn exited");
    leader = leaderPid(nspawnPid);
    if (!leader) {
      if (Date.now() > deadline) throw bootFailure(n, "no container process appeared");
      await sleep(100);
    }
  }
  for (;;) {
    const r = await execIn(leader, ["systemctl", "is-system-running", "--wait"], {
      timeoutMs: Math.max(1000, deadline - Date.now()),
    });
    const st = r.stdout.trim();
    if (st === "running" || st === "degraded") break;
    if (Date.now() > deadline) throw bootFailure(n, `system state ${st || r.stderr.trim()}`);
    if (!pidAlive(nspawnPid)) throw bootFailure(n, "systemd-nspawn exited");
    await sleep(250);
  }
  for (;;) {
    const r = await execIn(leader, ["systemctl", "is-active", "ssh.service"]);
    if (
      r.stdout.trim() === "active" &&
      fs.existsSync(path.join(n.root, "etc/ssh/ssh_host_ed25519_key.pub"))
    ) {
      return leader;
    }
    if (Date.now() > deadline) throw bootFailure(n, `ssh.service is ${r.stdout.trim()}`);
    await sleep(200);
  }
}

function bootFailure(n: NodeRuntime, why: string): Error {
  let tail = "";
  try {
    tail = fs.readFileSync(n.consoleLog, "utf8").split("\n").slice(-25).join("\n");
  } catch {
    /* no log */
  }
  return new Error(`sim: ${n.name} did not boot: ${why}; console (${n.consoleLog}):\n${tail}`);
}

/**
 * Powers the node off: SIGTERM to nspawn makes it send the container SIGRTMIN+4 (poweroff);
 * after `graceMs` everything left is killed.
 */
export async function stopContainer(n: NodeRuntime, graceMs = 20_000): Promise<boolean> {
  const pid = nodePid(n);
  if (!pid) {
    removeCgroups(n.machine);
    return false;
  }
  const leader = leaderPid(pid);
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    /* already gone */
  }
  const deadline = Date.now() + graceMs;
  while (pidAlive(pid) && Date.now() < deadline) await sleep(100);
  if (pidAlive(pid) || pidAlive(leader)) {
    for (const p of [leader, pid]) {
      try {
        if (p) process.kill(p, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    const hard = Date.now() + 5000;
    while ((pidAlive(pid) || pidAlive(leader)) && Date.now() < hard) await sleep(50);
  }
  killCgroupProcs(n.machine);
  removeCgroups(n.machine);
  return true;
}

/** SIGKILLs whatever is still in a container's cgroups (after the container itself is gone). */
export function killCgroupProcs(machine: string): void {
  for (const dir of cgroupDirs(machine)) {
    if (!fs.existsSync(dir)) continue;
    const walk = (d: string) => {
      try {
        for (const p of fs.readFileSync(path.join(d, "cgroup.procs"), "utf8").split("\n")) {
          if (p.trim()) {
            try {
              process.kill(Number(p), "SIGKILL");
            } catch {
              /* gone */
            }
          }
        }
        for (const e of fs.readdirSync(d, { withFileTypes: true })) {
          if (e.isDirectory()) walk(path.join(d, e.name));
        }
      } catch {
        /* vanished */
      }
    };
    walk(dir);
  }
}
