// The llama.cpp source comes from node-llama-cpp's npm tarball, fetched with the real `npm pack`
// from the registry this machine uses, and checked against the pinned integrity.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { llamaBundleDir, NODE_LLAMA_CPP } from "../../sim/llama/bundle";

const cache = mkdtempSync(path.join(tmpdir(), "sf-bundle-"));
afterAll(() => rmSync(cache, { recursive: true, force: true }));

describe("llamaBundleDir", () => {
  it("fetches the tarball once, keeps only the bundle and its info, keyed by version", () => {
    const dir = llamaBundleDir(cache);
    expect(dir).toBe(path.join(cache, `node-llama-cpp-${NODE_LLAMA_CPP.version}`, "llama"));
    expect(readdirSync(dir).sort()).toEqual(["gitRelease.bundle", "llama.cpp.info.json"]);
    const heads = execFileSync(
      "git",
      ["bundle", "list-heads", path.join(dir, "gitRelease.bundle")],
      {
        encoding: "utf8",
      },
    );
    expect(heads).toContain("80fb11ac73e66d89eae2c6a91d8a77428fa733ed");
    expect(JSON.parse(readFileSync(path.join(dir, "llama.cpp.info.json"), "utf8"))).toHaveProperty(
      "tag",
    );
    expect(llamaBundleDir(cache)).toBe(dir); // cached: no second fetch, no stage left behind
    expect(readdirSync(cache)).toEqual([`node-llama-cpp-${NODE_LLAMA_CPP.version}`]);
  });

  it("refuses a tarball whose integrity is not the pinned one, and keeps nothing", () => {
    const other = path.join(cache, "other");
    const pinned = { ...NODE_LLAMA_CPP, integrity: `sha512-${"A".repeat(86)}==` };
    expect(() => llamaBundleDir(other, pinned)).toThrow(
      new RegExp(
        `node-llama-cpp@${NODE_LLAMA_CPP.version} from the registry has integrity sha512-\\S+, not the pinned`,
      ),
    );
    expect(existsSync(other) ? readdirSync(other) : []).toEqual([]);
  });

  it("a version the registry does not have: says what failed and what to check", () => {
    expect(() =>
      llamaBundleDir(path.join(cache, "none"), { version: "0.0.0-nope", integrity: "x" }),
    ).toThrow(
      /npm pack node-llama-cpp@0\.0\.0-nope failed .*check that the npm registry is reachable/,
    );
  });
});
