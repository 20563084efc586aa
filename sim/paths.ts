// Where the simulated cluster keeps its state, its image cache and its machine-wide records.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** The repository root, found from this module's own location (sim/ → ..). */
export const repoRoot: string = path.resolve(__dirname, "..");

/** `${SPARKFORM_STATE_DIR:-<repo>/.sparkform}/sim`: this run's state (cluster.json, keys, roots). */
export function simStateDir(): string {
  const base = process.env.SPARKFORM_STATE_DIR || path.join(repoRoot, ".sparkform");
  return path.join(path.resolve(base), "sim");
}

/** True when the state dir is the repository's default one (then `sim up` writes the stack file). */
export function usingDefaultStateDir(): boolean {
  return !process.env.SPARKFORM_STATE_DIR;
}

/** `${SPARKFORM_CACHE_DIR:-$HOME/.cache/sparkform}/images`: built images, shared by every state dir. */
export function imageCacheDir(): string {
  const base =
    process.env.SPARKFORM_CACHE_DIR || path.join(os.homedir() || "/root", ".cache", "sparkform");
  return path.join(path.resolve(base), "images");
}

/**
 * Machine-wide records (tmpfs: they vanish on reboot together with the namespaces they describe):
 * one file per run id so that concurrent runs from different state dirs never pick the same
 * names or subnets, and `sim down` can tell an orphan from another run's live resources.
 */
export const runRegistryDir = "/run/sparkform/runs";
export const globalLockPath = "/run/sparkform/net.lock";

export function ensureDir(dir: string, mode = 0o755): string {
  fs.mkdirSync(dir, { recursive: true, mode });
  return dir;
}

/** Every name the sim creates starts with `sf` + a kind letter + `-` + the 6-hex run id. */
export const names = {
  bridge: (id: string) => `sfm-${id}`, // mgmt bridge on the host (10 chars)
  hostVeth: (id: string, n: number) => `sfv-${id}-${n}`, // host end of a node's mgmt veth
  tmpVeth: (id: string, n: number, side: string) => `sft-${id}-${n}${side}`, // before moving
  nodeNetns: (id: string, n: number) => `sfn-${id}-${n}`,
  fabricNetns: (id: string) => `sff-${id}`, // the fabric switch, for N > 2 (rail 0)
  /** The switch of rail `r` (rail 0 keeps the name it always had). */
  railNetns: (id: string, r: number) => (r === 0 ? `sff-${id}` : `sff-${id}-${r}`),
  machine: (id: string, node: string) => `sf-${id}-${node}`,
} as const;

/** Matches any name above and captures the run id. */
export const simNamePattern = /^sf[mvtnf]?-([0-9a-f]{6})(?:-|$)/;

export const mgmtIface = "mgmt0";
export const fabricIface = "fabric0";
/** The fabric's rails, as on the lab's pair: two point-to-point links on two subnets. */
export const fabricRails = 2;
/** The interface of rail `r` inside every node: fabric0, fabric1. */
export const railIface = (r: number) => `fabric${r}`;
export const fabricMtu = 9000;
/**
 * Each rail's line rate, Mbit/s: every node's end of every rail is shaped to it with tc (tbf),
 * so a rail has a known, fixed rate to be judged against, as a Spark's port has its link speed
 * (the local stack's `fabric.referenceGbps`). 1 Gbit/s is well under what one TCP stream does
 * over an unshaped veth on this 2-core machine under load (3.0-5.9 Gbit/s seen), so a busy host
 * still reads the line (0.99-1.03 measured with a build running), and a rail shaped to a tenth
 * reads 0.1.
 */
export const fabricLineMbit = 1000;
/** Routing protocol number tagging the host's `unreachable` routes for fabric subnets. */
export const routeProto = 245;
