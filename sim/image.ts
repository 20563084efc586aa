// The node image: a debootstrapped Debian root, configured once and cached under a key derived
// from everything that shapes it (suite, variant, package list, configure script).
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { CommandError, run, runRaw } from "./exec";
import { withLock } from "./lock";
import { ensureDir, imageCacheDir } from "./paths";

export const imageSuite = "bookworm";
export const imageVariant = "minbase";
/** Bumped when the build procedure changes in a way the script text does not show. */
export const imageBuildVersion = 1;

/** What every node has: systemd + logind + dbus, sshd, rsync, curl, a C/C++ toolchain, python3. */
export const imagePackages: readonly string[] = [
  "systemd",
  "systemd-sysv",
  "dbus",
  "dbus-user-session",
  "libpam-systemd",
  "openssh-server",
  "openssh-client",
  "rsync",
  "iproute2",
  "iputils-ping",
  "curl",
  "ca-certificates",
  "procps",
  "python3",
  "build-essential",
  "cmake",
  "ninja-build",
  "binutils",
  "ccache",
  "git",
  "xz-utils",
];

/** Run inside the fresh root with chroot: the things every node shares. */
export const configureScript = String.raw`set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
# The spark user: uid 1000, key-only login, linger on (its user manager runs from boot).
useradd --create-home --uid 1000 --user-group --shell /bin/bash spark
usermod --password '*' spark
install -d -m 0700 -o spark -g spark /home/spark/.ssh
install -d -m 0755 /var/lib/systemd/linger
touch /var/lib/systemd/linger/spark
# sshd: keys only; host keys are made per node at first boot, never shared through the image.
rm -f /etc/ssh/ssh_host_*
cat > /etc/ssh/sshd_config.d/sparkform.conf <<'CONF'
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM yes
CONF
cat > /etc/systemd/system/sparkform-hostkeys.service <<'UNIT'
[Unit]
Description=Generate this node's SSH host key (first boot)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N "" -C "" -f /etc/ssh/ssh_host_ed25519_key

[Install]
WantedBy=multi-user.target ssh.service
UNIT
systemctl enable sparkform-hostkeys.service ssh.service
# Interfaces and addresses are set from outside by the sim; nothing inside reconfigures them.
systemctl mask systemd-networkd.service systemd-networkd.socket systemd-networkd-wait-online.service \
  console-getty.service getty@tty1.service systemd-timesyncd.service 2>/dev/null || true
grep -q pam_systemd /etc/pam.d/common-session
# Each node gets its own machine id.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
printf '%s\n' '# filled per node by the sim' > /etc/hosts
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
`;

export interface ImageInfo {
  key: string;
  rootfs: string;
  dir: string;
}

export function imageKey(): string {
  const h = createHash("sha256");
  h.update(
    JSON.stringify({
      suite: imageSuite,
      variant: imageVariant,
      packages: [...imagePackages].sort(),
      buildVersion: imageBuildVersion,
      script: configureScript,
    }),
  );
  return `${imageSuite}-${h.digest("hex").slice(0, 16)}`;
}

export function cachedImage(): ImageInfo | undefined {
  const key = imageKey();
  const dir = path.join(imageCacheDir(), key);
  if (!fs.existsSync(path.join(dir, "manifest.json"))) return undefined;
  return { key, dir, rootfs: path.join(dir, "rootfs") };
}

/**
 * The Debian mirror this host's apt uses (the first `URIs:` of debian.sources, else the first
 * `deb` line of sources.list), so the image comes from where the host's packages come from.
 */
export function hostDebianMirror(): string | undefined {
  const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, "utf8") : "");
  const deb822 = /^URIs:\s*(\S+)/m.exec(read("/etc/apt/sources.list.d/debian.sources"));
  if (deb822?.[1]) return deb822[1];
  const classic = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)/m.exec(read("/etc/apt/sources.list"));
  return classic?.[1];
}

/** Returns the cached image, building it first (debootstrap + configure) when absent. */
export async function ensureImage(log: (s: string) => void): Promise<ImageInfo> {
  const key = imageKey();
  const cache = ensureDir(imageCacheDir());
  return withLock(path.join(cache, `.lock-${key}`), "image build", async () => {
    const hit = cachedImage();
    if (hit) return hit;
    const dir = path.join(cache, key);
    const build = path.join(cache, `.build-${key}`);
    fs.rmSync(build, { recursive: true, force: true });
    ensureDir(build);
    const rootfs = path.join(build, "rootfs");
    const mirror = process.env.SPARKFORM_DEBIAN_MIRROR || hostDebianMirror();
    const started = Date.now();
    log(
      `sim: building node image ${key} (debootstrap ${imageSuite}, ${imagePackages.length} packages; a few minutes, once)`,
    );
    const logFile = path.join(build, "build.log");
    const steps: Array<[string, string[]]> = [
      [
        "debootstrap",
        [
          `--variant=${imageVariant}`,
          `--include=${imagePackages.join(",")}`,
          imageSuite,
          rootfs,
          // No mirror: debootstrap's own default.
          ...(mirror ? [mirror] : []),
        ],
      ],
      ["chroot", [rootfs, "/bin/bash", "-s"]],
    ];
    for (const [cmd, args] of steps) {
      const r = await runRaw(cmd, args, {
        input: cmd === "chroot" ? configureScript : undefined,
        env: { ...process.env, LC_ALL: "C", DEBIAN_FRONTEND: "noninteractive" },
      });
      fs.appendFileSync(logFile, `$ ${cmd} ${args.join(" ")}\n${r.stdout}${r.stderr}\n`);
      if (r.exitCode !== 0) {
        throw new Error(
          `sim: building the node image failed (${new CommandError([cmd, ...args], r).message.split("\n")[0]}); full log: ${logFile}\n` +
            `${(r.stdout + r.stderr).trim().slice(-2000)}`,
        );
      }
    }
    const manifest = {
      key,
      suite: imageSuite,
      variant: imageVariant,
      packages: imagePackages,
      buildVersion: imageBuildVersion,
      mirror,
      builtAt: new Date().toISOString(),
      buildSeconds: Math.round((Date.now() - started) / 1000),
    };
    fs.writeFileSync(path.join(build, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(build, dir);
    log(`sim: node image ${key} built in ${manifest.buildSeconds} s`);
    return { key, dir, rootfs: path.join(dir, "rootfs") };
  });
}

/** Removes every cached image but the current one (not called automatically). */
export async function pruneImages(): Promise<string[]> {
  const keep = imageKey();
  const cache = imageCacheDir();
  if (!fs.existsSync(cache)) return [];
  const removed: string[] = [];
  for (const e of fs.readdirSync(cache)) {
    if (e === keep || e.startsWith(".lock-")) continue;
    await run("rm", ["-rf", "--one-file-system", path.join(cache, e)]);
    removed.push(e);
  }
  return removed;
}
