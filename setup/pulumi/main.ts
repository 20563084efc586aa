// `npm run pulumi -- <args>`: the pulumi CLI with sparkform's offline settings (see env.ts), and
// a stack's own policy config wherever the policy pack is asked for (policy.ts).
import { spawnSync } from "node:child_process";
import { pulumiBinary, pulumiEnv, repoRoot } from "./env";
import { selectedStack, withStackPolicyConfig } from "./policy";

const env = pulumiEnv();
const result = spawnSync(
  pulumiBinary(),
  withStackPolicyConfig(process.argv.slice(2), () => selectedStack(env)),
  { stdio: "inherit", env, cwd: process.env.INIT_CWD ?? repoRoot },
);
if (result.error) throw result.error;
process.exit(result.status ?? 1);
