// `sparkform llama-source <dir>`: the llama.cpp checkout the local stack syncs and builds,
// extracted from node-llama-cpp's git bundle (sim/llama).
import { parseArgs } from "node:util";
import { extractLlamaSource } from "../../sim/llama";
import { out, UsageError } from "../errors";

export const usage = "usage: sparkform llama-source <dir>";

export async function run(argv: string[]): Promise<number> {
  const { positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true });
  const [dir, ...extra] = positionals;
  if (!dir || extra.length > 0) throw new UsageError("give exactly one directory");
  const { commit, tag } = extractLlamaSource(dir);
  out(`llama.cpp ${tag} (${commit}) in ${dir}`);
  return 0;
}
