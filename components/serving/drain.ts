// ServingDrain: the point in `up` where the server stops because a build changed (see
// drain-provider.ts). Created before the worker stage, which depends on it.
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import type { Builds } from "../build/builds";
import type { Validated } from "../config/descriptor";
import type { Nodes } from "../node/nodes";
import type { StackServer } from "./config";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import { gatherByNode } from "../stage";
import type { ServingDrainOutputs } from "./drain-provider";
import { stackOwner } from "../unit/stack-owner";
import { SERVER_PROGRAMS } from "./commands";

const provider = delegatingProvider(path.join(__dirname, "drain-provider.ts"));

export class ServingDrain extends SparkformResource<"ServingDrain", ServingDrainOutputs> {
  declare readonly drainedAt: pulumi.Output<string>;

  constructor(
    name: string,
    args: {
      nodes: Nodes;
      builds: Builds;
      /** `sparkform:server`, validated: the server on `node` and `port` is what it stops. */
      config: Validated<StackServer>;
    },
    opts?: pulumi.CustomResourceOptions,
  ) {
    // No provider version: ServingDrain never recorded one, and adding it would be a diff.
    super(
      {
        kind: "ServingDrain",
        provider,
        programs: { programs: { stop: SERVER_PROGRAMS.stop } },
        outputs: ["drainedAt"],
      },
      name,
      {
        target: args.nodes.target(args.config.node),
        port: args.config.port,
        owner: stackOwner(),
        builds: gatherByNode(args.nodes.names, (n) => {
          const b = args.builds.of(n);
          return { commit: b.commit, treeDigest: b.treeDigest, artifacts: b.artifacts };
        }),
      },
      args.nodes.childOpts({ ...opts }),
    );
  }
}
