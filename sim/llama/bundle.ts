// llama.cpp's source as node-llama-cpp ships it: a git bundle inside the package's npm tarball.
// Only that tarball is fetched (`npm pack`), never installed: installing node-llama-cpp brings
// about 680 MB of prebuilt binaries through its optional dependencies, none of which we run.
// The tarball is checked against its pinned registry integrity; the two files we need are kept
// under the cache directory, keyed by version.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

export interface BundleSource {
  readonly version: string;
  /** The registry's `dist.integrity` of that version's tarball (`npm view … dist.integrity`). */
  readonly integrity: string;
}

/** The release whose bundle holds llama.cpp commit 80fb11ac73e66d89eae2c6a91d8a77428fa733ed. */
export const NODE_LLAMA_CPP: BundleSource = {
  version: "3.21.1",
  integrity:
    "sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==",
};

const FILES = ["gitRelease.bundle", "llama.cpp.info.json"];

function complete(dir: string): boolean {
  return FILES.every((f) => fs.existsSync(path.join(dir, f)));
}

/**
 * The directory holding `gitRelease.bundle` and `llama.cpp.info.json` of `source`, fetched into
 * `<cacheDir>/node-llama-cpp-<version>/llama` on first use (written aside, then renamed in).
 */
export function llamaBundleDir(cacheDir: string, source: BundleSource = NODE_LLAMA_CPP): string {
  const dir = path.join(cacheDir, `node-llama-cpp-${source.version}`, "llama");
  if (complete(dir)) return dir;
  fs.mkdirSync(cacheDir, { recursive: true });
  const stage = fs.mkdtempSync(path.join(cacheDir, ".node-llama-cpp-"));
  try {
    const spec = `node-llama-cpp@${source.version}`;
    const pack = spawnSync("npm", ["pack", spec, "--pack-destination", stage, "--silent"], {
      cwd: stage,
      encoding: "utf8",
    });
    if (pack.status !== 0) {
      throw new Error(
        `npm pack ${spec} failed (exit ${pack.status ?? pack.signal}): ` +
          `${(pack.stderr || pack.error?.message || "").trim().split("\n").slice(-3).join(" | ")}. ` +
          "sparkform takes llama.cpp's source from that package's tarball: check that the npm registry is reachable (npm config get registry)",
      );
    }
    const tgz = path.join(stage, `node-llama-cpp-${source.version}.tgz`);
    const got = `sha512-${createHash("sha512").update(fs.readFileSync(tgz)).digest("base64")}`;
    if (got !== source.integrity) {
      throw new Error(
        `${spec} from the registry has integrity ${got}, not the pinned ${source.integrity}: ` +
          "refusing to build llama.cpp from it (a republished or tampered package)",
      );
    }
    const members = FILES.map((f) => `package/llama/${f}`);
    const tar = spawnSync("tar", ["-xzf", tgz, "-C", stage, ...members], { encoding: "utf8" });
    if (tar.status !== 0) throw new Error(`tar -xzf ${tgz} failed: ${tar.stderr.trim()}`);
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    try {
      fs.renameSync(path.join(stage, "package", "llama"), dir);
    } catch (err) {
      // Another process put it there first.
      if (!complete(dir)) throw err;
    }
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
  return dir;
}
