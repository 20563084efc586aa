// A stack's program: every `sparkform:` key read and validated at once, then one SparkCluster.
// The project's index.ts and the e2e test programs are this, so they cannot drift apart.
import * as pulumi from "@pulumi/pulumi";
import { SparkCluster } from "./cluster";
import { readStackConfig } from "./stack-config";

/** The stack's SparkCluster, named after the stack, from its validated configuration. */
export function stackCluster(projectDir: string): SparkCluster {
  const config = readStackConfig(new pulumi.Config("sparkform"), { projectDir });
  return new SparkCluster(pulumi.getStack(), { config, projectDir });
}
