// `sparkform sync`: the runbook's sync.sh — push the working tree to every node and prove it by
// digest, nothing else. The rsync and the proof run here, through the stack's transport, with
// TreeSync's own code (components/tree/provider.ts `syncTree`), on every node at once; then a
// targeted `pulumi refresh` of the tree resources records what the nodes hold, so the stack's
// state stays true (the next refresh agrees) without a whole `pulumi up`. A change to the tree's
// layout (source, dest, exclusions, nodes) is `pulumi up`'s to make: sync refuses it.
import { parseArgs } from "node:util";
import isEqual from "fast-deep-equal";
import { syncTree, TREE_SOURCE_ENV, type TreeSyncOutputs } from "../../components/tree/provider";
import { localTreeDigest } from "../../components/tree/digest";
import { resourcesOf } from "../../stack-state";
import { refreshTargets, stackName, stackState } from "../engine";
import { out, UsageError } from "../errors";
import { readStack } from "../stack";

export const summary = "push the working tree to every node and prove it by digest";
export const usage = `usage: sparkform sync [--stack S]
  --stack S   the stack (default: the selected one)`;

type TreeState = Partial<TreeSyncOutputs>;

// The node from the resource's id (`<node>:<dest>`): a stack with a private key keeps `target`
// encrypted in state, and `stack export` shows it as ciphertext.
const treesOf = (stack: string) =>
  resourcesOf(stackState(stack), "TreeSync").map((r) => ({
    urn: r.urn,
    node: r.id?.split(":")[0] ?? r.urn,
    o: r.outputs as TreeState,
  }));

const proofLine = (s: TreeSyncOutputs, digest: string, state: string) =>
  `${s.target.name}: ${s.files} files, ${(s.bytes / 1e6).toFixed(1)} MB, ` +
  `digest ${digest.slice(0, 16)} = the control node's, ${state}`;

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { stack: { type: "string" } },
    strict: true,
  });
  const stack = stackName(values.stack);
  const trees = treesOf(stack);
  if (trees.length === 0) {
    throw new UsageError(
      "the stack has no synced tree yet: set sparkform:tree and run `pulumi up` (or `npm run local`) once",
    );
  }
  const view = readStack(stack);
  const tree = view.config.tree;
  // Not the source: it is this checkout's path to the tree, and the stack may have been synced
  // from another operator's checkout (README "Team"); what sync pushes is this checkout's tree.
  const layout = { dest: tree?.dest, exclude: tree?.exclude ?? [] };
  const stateNodes = trees.map((t) => t.node).sort();
  const configNodes = view.config.nodes.map((n) => n.name).sort();
  const moved = trees.find(({ o }) => !isEqual({ dest: o.dest, exclude: o.exclude ?? [] }, layout));
  if (!tree || moved || !isEqual(stateNodes, configNodes)) {
    throw new UsageError(
      `sparkform:tree or sparkform:nodes changed since the last \`pulumi up\` ` +
        `(the stack synced ${JSON.stringify(moved?.o.dest ?? trees[0]?.o.dest)} to ${stateNodes.join(", ")}; ` +
        `the config says ${JSON.stringify(tree?.dest)} to ${configNodes.join(", ")}): ` +
        "sync only pushes edits into the tree the stack made; run `pulumi up`, which syncs the new layout and records it",
    );
  }
  const control = localTreeDigest(tree.source, tree.exclude);
  // Every node at once: each rsync and digest is the node's own work (and its own link).
  const synced = await Promise.all(
    trees.map(({ o, node }) =>
      syncTree({
        ...(o as TreeSyncOutputs),
        source: tree.source,
        target: view.target(node),
        expectedDigest: control.digest,
      }),
    ),
  );
  // Nothing moved (every node already held the tree the state records): nothing to record.
  const unchanged = trees.every(
    ({ o }) => o.digest === control.digest && o.expectedDigest === control.digest,
  );
  if (unchanged) {
    for (const s of synced) out(proofLine(s, control.digest, "already recorded"));
    return 0;
  }
  const recorded = refreshTargets(
    stack,
    trees.map((t) => t.urn),
    { [TREE_SOURCE_ENV]: tree.source },
  );
  if (recorded.code !== 0) {
    throw new Error(
      `every node holds the control node's tree (digest ${control.digest.slice(0, 16)}), but the ` +
        `stack's state could not record it (pulumi refresh exited ${recorded.code}); the next ` +
        `\`pulumi up\` records it. The engine said:\n${recorded.output}`,
    );
  }
  // The proof, from state: every node's digest is the control node's, and recorded as expected.
  let ok = true;
  const after = new Map(treesOf(stack).map((t) => [t.node, t.o]));
  for (const s of synced) {
    const o = after.get(s.target.name) ?? {};
    const same = o.digest === control.digest && o.expectedDigest === control.digest;
    ok &&= same;
    out(
      same
        ? proofLine(s, control.digest, "recorded")
        : `${s.target.name}: digest ${(o.digest ?? "").slice(0, 16)} in the state != the control node's ` +
            `${control.digest.slice(0, 16)}: the tree changed during the sync; run it again, or \`pulumi up\``,
    );
  }
  return ok ? 0 : 1;
}
