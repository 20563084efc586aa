// Test stack for NativeBuild (see ../native-build.test.ts): the llama.cpp tree synced to every
// node of the simulated pair with TreeSync, then built on each node, the first node first and
// the others seeded from its compiler cache. Node targets come from the stack config that
// sim renders (sparkform:nodes, sshKeyPath, sshConfigPath), plus sparkform:tree and
// sparkform:build.
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import {
  BuildConfigError,
  parseBuildConfig,
  stackBuildFlags,
} from "../../../components/build/config";
import { NativeBuild } from "../../../components/build/native-build";
import {
  ConfigError,
  parseClusterConfig,
  sshTarget,
  type NodeConfig,
} from "../../../components/config";
import type { SshTarget } from "../../../components/transport/ssh";
import { localTreeDigest } from "../../../components/tree/digest";
import { TreeSync } from "../../../components/tree/tree-sync";

const config = new pulumi.Config("sparkform");
const cluster = userError(() =>
  parseClusterConfig({
    nodes: config.requireObject("nodes"),
    sshKeyPath: config.get("sshKeyPath"),
    sshConfigPath: config.get("sshConfigPath"),
    tree: config.requireObject("tree"),
  }),
);
const tree = cluster.tree as NonNullable<typeof cluster.tree>;

/** Config mistakes are user errors: RunError prints the message without a stack trace. */
function userError<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof BuildConfigError || err instanceof ConfigError) {
      throw new pulumi.RunError(err.message);
    }
    throw err;
  }
}
const build = userError(() => parseBuildConfig(config.getObject("build")));

const target = (n: NodeConfig): SshTarget => sshTarget(n, cluster);

const source = path.resolve(tree.source);
// The flags first: a bad contract stops the program before anything is read or connected.
const flags = userError(() => stackBuildFlags(build, { source, exclude: tree.exclude }));
const expected = localTreeDigest(source, tree.exclude);

const seedNode = cluster.nodes.find((n) => n.name === (build.cacheFrom ?? cluster.nodes[0]?.name));
let seedBuild: NativeBuild | undefined;
const builds: NativeBuild[] = [];
const ordered = seedNode
  ? [seedNode, ...cluster.nodes.filter((n) => n !== seedNode)]
  : cluster.nodes;
for (const node of ordered) {
  const sync = new TreeSync(`tree-${node.name}`, {
    target: target(node),
    source,
    dest: tree.dest,
    exclude: tree.exclude,
    expectedDigest: expected.digest,
  });
  const nb = new NativeBuild(
    `build-${node.name}`,
    {
      target: target(node),
      tree: tree.dest,
      treeDigest: sync.digest,
      flags,
      targets: build.targets,
      artifacts: build.artifacts,
      ...(build.jobs ? { jobs: build.jobs } : {}),
      ...(build.command ? { command: build.command } : {}),
      ...(seedBuild && seedNode
        ? {
            cacheFrom: {
              target: target(seedNode),
              ...(seedNode.fabricAddress ? { fabricAddress: seedNode.fabricAddress } : {}),
            },
          }
        : {}),
    },
    { dependsOn: seedBuild ? [sync, seedBuild] : [sync] },
  );
  if (node === seedNode) seedBuild = nb;
  builds.push(nb);
}

export const expectedTree = expected.digest;
export const result = pulumi
  .all(
    builds.map((b) =>
      pulumi.output({
        buildKey: b.buildKey,
        commit: b.commit,
        installDir: b.installDir,
        checks: b.checks,
        instructions: b.instructions,
        artifacts: b.artifacts,
        cache: b.cache,
        seconds: b.seconds,
      }),
    ),
  )
  .apply((rows) => Object.fromEntries(ordered.map((n, i) => [n.name, rows[i]])));
