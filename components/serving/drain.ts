// ServingDrain: the point in `up` where the server stops because a build changed (see
// drain-provider.ts). Created before the worker stage, which depends on it.
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { DYNAMIC_MODULE } from "../aliases";
import type { Builds } from "../build/builds";
import { programRef } from "../native-script";
import type { Nodes } from "../node/nodes";
import { delegatingProvider } from "../providers/delegate";
import { gatherByNode } from "../stage";
import { SERVER_PROGRAMS } from "./server-plan";

const provider = delegatingProvider(path.join(__dirname, "drain-provider.ts"));

export class ServingDrain extends pulumi.dynamic.Resource {
  declare readonly drainedAt: pulumi.Output<string>;

  constructor(
    name: string,
    args: { nodes: Nodes; builds: Builds; client: string; port: number },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super(
      provider,
      name,
      {
        kind: "ServingDrain",
        target: args.nodes.target(args.client),
        port: args.port,
        builds: gatherByNode(args.nodes.names, (n) => {
          const b = args.builds.of(n);
          return { commit: b.commit, treeDigest: b.treeDigest, artifacts: b.artifacts };
        }),
        programs: { stop: programRef(SERVER_PROGRAMS.stop) },
        drainedAt: undefined,
      },
      args.nodes.childOpts({ ...opts }),
      DYNAMIC_MODULE,
      "ServingDrain",
    );
  }
}
