// The contract every stage component keeps (nodes, toolchain, tree, build, model; later fabric,
// rpc-worker, serving), so SparkCluster only composes them and the next stage reads what it
// needs from the previous one, as pulumi-eks hands a Cluster to a NodeGroup.
import * as pulumi from "@pulumi/pulumi";

/** A stage over the cluster's nodes. `S` is the per-node summary the stack exports. */
export interface Stage<S> {
  /** Per node name: the summary for the stack outputs. */
  readonly byNode: pulumi.Output<Record<string, S>>;
  /** The node's resource in this stage, for the next stage's inputs and `dependsOn`. */
  of(node: string): pulumi.Resource;
  /** What a later stage must wait for: every resource of this stage. */
  readonly ready: readonly pulumi.Resource[];
}

/**
 * Gather per-node outputs into one record, in node order: `perNode(name)` is each node's
 * summary (a plain object of Inputs). No casted tuples.
 */
export function gatherByNode<T>(
  names: readonly string[],
  perNode: (name: string) => pulumi.Input<T>,
): pulumi.Output<Record<string, pulumi.Unwrap<T>>> {
  const entries = names.map((n) => pulumi.output(perNode(n)).apply((v) => [n, v] as const));
  return pulumi
    .all(entries)
    .apply((rows) => Object.fromEntries(rows) as Record<string, pulumi.Unwrap<T>>);
}

/** A stage's resources by node name; asking for a node the stage does not cover is an error. */

export class PerNode<R> {
  private readonly map: ReadonlyMap<string, R>;

  constructor(
    private readonly owner: pulumi.Resource,
    /** What the resources are, for the message: "tree", "build", … */
    private readonly what: string,
    entries: Iterable<readonly [string, R]>,
  ) {
    this.map = new Map(entries);
  }

  of(node: string): R {
    const r = this.map.get(node);
    if (r === undefined) {
      throw new pulumi.ResourceError(
        `no ${this.what} for node ${JSON.stringify(node)} (have ${[...this.map.keys()].join(", ")})`,
        this.owner,
      );
    }
    return r;
  }

  /** Every resource, in node order: what a later stage waits for. */
  values(): R[] {
    return [...this.map.values()];
  }
}
