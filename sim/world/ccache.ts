// spark-1's compiler cache kept on the control node between simulated runs: the acceptance
// world, the e2e tests and the sim benches share one, so a cold llama.cpp build is paid once.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import type { SimCluster } from "../state";

/**
 * spark-1's compiler cache, kept on the control node between runs in `dir` (CI passes
 * SPARKFORM_E2E_NODE_CCACHE): seeded before the first build, saved after it. A no-op without a
 * directory. spark-2 seeds itself from spark-1 (NativeBuild's cacheFrom).
 */
export function nodeCcache(cluster: SimCluster, dir: string | undefined, node = "spark-1") {
  const remote = `spark@${node}:.cache/sparkform/ccache/`;
  const ssh = ["-a", "-e", `ssh -F ${cluster.sshConfigPath}`];
  return {
    seed(): void {
      if (!dir) return;
      mkdirSync(dir, { recursive: true });
      execFileSync("ssh", ["-F", cluster.sshConfigPath, node, "mkdir -p .cache/sparkform/ccache"]);
      execFileSync("rsync", [...ssh, `${dir}/`, remote]);
    },
    save(): void {
      if (!dir) return;
      mkdirSync(dir, { recursive: true });
      execFileSync("rsync", [...ssh, remote, `${dir}/`]);
    },
  };
}
