// Test program for test/e2e/native-build.test.ts: the main program's SparkCluster on a config
// subset (sparkform:nodes, sshKeyPath, sshConfigPath as sim renders them, plus sparkform:tree
// and sparkform:build): the tree synced to every node, then built on each, the cache source
// first and the others seeded from its compiler cache.
import * as pulumi from "@pulumi/pulumi";
import { stackCluster } from "../../../components/stack";

const cluster = stackCluster(__dirname);
const { trees, builds } = cluster;
if (!trees || !builds)
  throw new Error("this test program needs sparkform:tree and sparkform:build");

export const expectedTree = trees.expected.digest;
export const result = pulumi.output(
  Object.fromEntries(
    cluster.nodes.names.map((n) => {
      const b = builds.of(n);
      return [
        n,
        {
          buildKey: b.buildKey,
          commit: b.commit,
          installDir: b.installDir,
          checks: b.checks,
          instructions: b.instructions,
          artifacts: b.artifacts,
          cache: b.cache,
          seconds: b.seconds,
        },
      ];
    }),
  ),
);
