// The tree digest of a directory on a node: native/tree/tree-digest.py arrives on stdin, so the
// node runs the very same code as the control node (tree/digest.ts).
import { type NativeProgram, programCommand } from "../native-script";
import type { NodeConnection } from "../transport";
import { parseTreeDigest, type TreeDigest } from "./digest";

/** Digest of `root` on `node`, or undefined when the directory does not exist (exit 3). */
export async function remoteTreeDigest(
  node: NodeConnection,
  program: NativeProgram,
  root: string,
  opts: { args?: readonly string[]; step: string },
): Promise<TreeDigest | undefined> {
  const result = await node.run(
    programCommand(program, {
      args: [root, ...(opts.args ?? [])],
      display: `python3 native/${program.name} ${root}`,
    }),
    { step: opts.step, timeoutMs: 10 * 60_000, okExitCodes: [0, 3] },
  );
  if (result.exitCode === 3) return undefined;
  return parseTreeDigest(result.stdout, `node "${node.target.name}"`);
}
