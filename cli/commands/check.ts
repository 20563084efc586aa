// `sparkform check nccl-log <file>`: is an NCCL job on RDMA? Reads an NCCL_DEBUG=INFO log and
// judges it (components/fabric/nccl.ts): exit 0 on NET/IB, 1 on NET/Socket, `NET/IB : No device
// found` or no NCCL lines (with the fix), 2 when the file cannot be read.
import { createReadStream } from "node:fs";
import type { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { parseArgs } from "node:util";
import { checkNcclLog } from "../../components/fabric/nccl";
import { out, terminalSafe, UsageError } from "../errors";

export const usage = `usage: sparkform check nccl-log <file>   (- reads stdin)
  exit 0: NCCL is on NET/IB (via NET/IB > 0, no via NET/Socket)
  exit 1: NET/Socket, NET/IB : No device found, or no NCCL channel lines; the message says the fix
  exit 2: the file cannot be read (or a usage error)`;

/**
 * Every line the verdict reads names NET/IB or NET/Socket (checkNcclLog's patterns all contain
 * one of them), so only those lines are kept: a log of any size is read as a stream, in memory
 * only what decides. A 600 MB log read whole failed with "Cannot create a string longer than …".
 */
const DECIDING = /NET\/(IB|Socket)/;

/** The lines of `input` that match DECIDING, read line by line. */
export async function decidingLines(input: Readable): Promise<string> {
  const kept: string[] = [];
  const decoder = new StringDecoder("utf8");
  let partial = "";
  const take = (line: string) => {
    if (DECIDING.test(line)) kept.push(line);
  };
  for await (const chunk of input) {
    const lines = (partial + decoder.write(chunk as Buffer)).split("\n");
    partial = lines.pop() as string;
    lines.forEach(take);
  }
  take(partial + decoder.end());
  return kept.join("\n");
}

export async function run(argv: string[]): Promise<number> {
  const { positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true });
  const [what, file, ...extra] = positionals;
  if (what !== "nccl-log") throw new UsageError(`unknown check ${JSON.stringify(what ?? "")}`);
  if (!file || extra.length > 0) throw new UsageError("give exactly one log file");
  let text: string;
  try {
    text = await decidingLines(file === "-" ? process.stdin : createReadStream(file));
  } catch (e) {
    process.stderr.write(
      terminalSafe(
        `sparkform check: cannot read ${file}: ${(e as Error).message} (give the path of the job's log, NCCL_DEBUG=INFO)\n`,
      ),
    );
    return 2;
  }
  const v = checkNcclLog(text);
  out(`${v.ok ? "PASS" : "FAIL"}: ${v.message}`);
  if (v.evidence) out(`  evidence: ${v.evidence}`);
  return v.ok ? 0 : 1;
}
