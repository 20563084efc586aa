// The tree digest of a directory on a node: native/tree-digest.py arrives on stdin, so the node
// runs the very same code as the control node (tree/digest.ts).
import type { NodeConnection } from "../transport/ssh";
import { parseTreeDigest, type TreeDigest } from "./digest";

/** Digest of `root` on `node`, or undefined when the directory does not exist (exit 3). */
export async function remoteTreeDigest(
  node: NodeConnection,
  script: string,
  root: string,
  opts: { args?: readonly string[]; step: string },
): Promise<TreeDigest | undefined> {
  const result = await node.run(
    {
      script: 'exec python3 - "$@"',
      args: [root, ...(opts.args ?? [])],
      stdin: script,
      display: `python3 native/tree-digest.py ${root}`,
    },
    { step: opts.step, timeoutMs: 10 * 60_000, okExitCodes: [0, 3] },
  );
  if (result.exitCode === 3) return undefined;
  return parseTreeDigest(result.stdout, `node "${node.target.name}"`);
}
