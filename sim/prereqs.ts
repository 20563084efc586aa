// Prerequisites: checked before anything is created; Debian packages installed when missing.
import * as fs from "node:fs";
import * as path from "node:path";
import { runRaw, run } from "./exec";

/** A command the sim needs on the host, and the Debian package that provides it. */
export interface Requirement {
  command: string;
  pkg: string;
}

export const hostRequirements: readonly Requirement[] = [
  { command: "systemd-nspawn", pkg: "systemd-container" },
  { command: "debootstrap", pkg: "debootstrap" },
  { command: "ip", pkg: "iproute2" },
  { command: "ssh", pkg: "openssh-client" },
  { command: "ssh-keygen", pkg: "openssh-client" },
  { command: "rsync", pkg: "rsync" },
  { command: "nsenter", pkg: "util-linux" },
  { command: "unshare", pkg: "util-linux" },
  { command: "mount", pkg: "mount" },
];

export class PrerequisiteError extends Error {
  override name = "PrerequisiteError";
}

function onPath(command: string): boolean {
  const dirs = (process.env.PATH || "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    .split(":")
    .concat(["/usr/sbin", "/sbin"]);
  return dirs.some((d) => {
    try {
      fs.accessSync(path.join(d, command), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export function missingRequirements(
  reqs: readonly Requirement[] = hostRequirements,
): Requirement[] {
  return reqs.filter((r) => !onPath(r.command));
}

function describe(missing: readonly Requirement[]): string {
  return missing.map((r) => `${r.command} (Debian package ${r.pkg})`).join(", ");
}

export function requireRoot(): void {
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    throw new PrerequisiteError(
      "sim: must run as root (it creates network namespaces, bridges, mounts and containers); " +
        "run it with sudo",
    );
  }
}

/** Network namespaces: the kernel must have them and we must be allowed to make one. */
export async function requireNetns(): Promise<void> {
  if (!fs.existsSync("/proc/self/ns/net")) {
    throw new PrerequisiteError(
      "sim: the kernel has no network namespaces (/proc/self/ns/net is missing; CONFIG_NET_NS)",
    );
  }
  const r = await runRaw("unshare", ["--net", "true"]);
  if (r.exitCode !== 0) {
    throw new PrerequisiteError(
      `sim: cannot create a network namespace (unshare --net: ${r.stderr.trim() || r.exitCode}); ` +
        "a container runtime without CAP_SYS_ADMIN cannot host the sim",
    );
  }
}

/**
 * Makes sure every host command is present, installing the missing Debian packages with apt-get
 * when `install` is set (running `apt-get update` first when the package lists are missing or
 * stale). Throws a PrerequisiteError naming each missing command and its package otherwise.
 */
export async function ensureHostPrerequisites(opts: {
  install: boolean;
  log?: (s: string) => void;
}): Promise<void> {
  requireRoot();
  let missing = missingRequirements();
  if (missing.length > 0 && opts.install && onPath("apt-get")) {
    const pkgs = [...new Set(missing.map((r) => r.pkg))];
    opts.log?.(`sim: installing ${pkgs.join(" ")} with apt-get`);
    await aptInstall(pkgs);
    missing = missingRequirements();
  }
  if (missing.length > 0) {
    const pkgs = [...new Set(missing.map((r) => r.pkg))];
    throw new PrerequisiteError(
      `sim: missing prerequisite${missing.length > 1 ? "s" : ""}: ${describe(missing)}; ` +
        `install with: apt-get install ${pkgs.join(" ")}`,
    );
  }
  await requireNetns();
}

const aptEnv = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
const aptLockWait = ["-o", "DPkg::Lock::Timeout=900"];

export async function aptInstall(pkgs: readonly string[]): Promise<void> {
  const install = () =>
    runRaw("apt-get", ["install", "-y", "-q", "--no-install-recommends", ...aptLockWait, ...pkgs], {
      env: aptEnv,
    });
  let r = await install();
  if (r.exitCode !== 0) {
    // Usually "Unable to locate package": the lists are missing or stale.
    await run("apt-get", ["update", "-q", ...aptLockWait], { env: aptEnv });
    r = await install();
  }
  if (r.exitCode !== 0) {
    throw new PrerequisiteError(
      `sim: apt-get install ${pkgs.join(" ")} failed (exit ${r.exitCode}):\n${(r.stdout + r.stderr).trim().slice(-3000)}`,
    );
  }
}
