// `npm run pulumi -- <args>`: the pulumi CLI with sparkform's offline settings (see env.ts).
import { spawnSync } from "node:child_process";
import { pulumiBinary, pulumiEnv, repoRoot } from "./env";

const result = spawnSync(pulumiBinary(), process.argv.slice(2), {
  stdio: "inherit",
  env: pulumiEnv(),
  cwd: process.env.INIT_CWD ?? repoRoot,
});
if (result.error) throw result.error;
process.exit(result.status ?? 1);
