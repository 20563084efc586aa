// RDMA facts from a sysfs fixture tree, for nodes that have no RDMA hardware (the simulated
// cluster's containers). The same native/facts.sh that runs on a node runs here on the control
// node with SPARKFORM_SYSFS_ROOT pointing at the tree, so the parsing is the product's; the
// result is labelled `source: "fixture"` everywhere it appears (outputs, checks, report).
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { nativeProgram } from "../native-script";
import { parseFacts } from "../node/facts";
import type { RdmaSource } from "./ports";

export const FIXTURES_DIR = path.join(__dirname, "..", "..", "test", "fixtures");

/**
 * The RDMA section of fixture `name` (a directory under test/fixtures, e.g. `sysfs-spark`),
 * with `<name>.ibv_devinfo` beside it standing in for ibv_devinfo (else `sysfs-spark`'s).
 */
export function fixtureRdma(name: string): RdmaSource {
  if (!/^sysfs-[a-z0-9-]+$/.test(name)) {
    throw new Error(
      `fabric fixture ${JSON.stringify(name)}: name a directory under test/fixtures like "sysfs-spark"`,
    );
  }
  const root = path.join(FIXTURES_DIR, name);
  if (!fs.existsSync(path.join(root, "class"))) {
    throw new Error(`fabric fixture ${name}: ${root}/class does not exist`);
  }
  const own = path.join(FIXTURES_DIR, `${name}.ibv_devinfo`);
  const ibv = fs.existsSync(own) ? own : path.join(FIXTURES_DIR, "sysfs-spark.ibv_devinfo");
  const stdout = execFileSync("/bin/sh", ["-c", nativeProgram("node/facts.sh").text, "facts.sh"], {
    encoding: "utf8",
    env: {
      PATH: "/usr/local/bin:/usr/bin:/bin",
      LANG: "C.UTF-8",
      HOME: "/nonexistent",
      SPARKFORM_SYSFS_ROOT: root,
      SPARKFORM_IBV_DEVINFO: ibv,
    },
  });
  const f = parseFacts(stdout, `fixture ${name}`);
  // The fixture's absolute path differs per checkout: name it instead, so state is the same
  // wherever the program runs.
  const named = (r: string | null) => (r === null ? null : r.split(root).join(`fixture ${name}`));
  return {
    source: "fixture",
    origin: name,
    devices: f.rdma.devices.map((d) => ({ ...d, reason: named(d.reason) })),
    netdevs: f.netdevs.map((n) => ({ ...n, reason: named(n.reason) })),
    reason: named(f.rdma.reason),
  };
}
