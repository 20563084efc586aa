// A stack's resources from `pulumi stack export` (no secrets), for benches that read what a
// stack recorded: hand-check expectations, the units and endpoints to time.
import { spawnSync } from "node:child_process";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";

export function stackResources<R>(stack: string): R[] {
  const r = spawnSync(pulumiBinary(), ["stack", "export", "--stack", stack], {
    cwd: repoRoot,
    env: pulumiEnv(),
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  if (r.status !== 0) throw new Error(`stack export failed: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { deployment: { resources: R[] } }).deployment.resources;
}
