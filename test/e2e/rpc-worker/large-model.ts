// The pre-warm test model: the sim's tiny llama (sim/gguf) made wide enough that every weight
// matrix of its layers is over ggml-rpc's HASH_THRESHOLD (10 MiB): 2560 wide, 20 heads without
// GQA (k/v 12.5 MiB), feed-forward 4096 (20 MiB), 2 layers: ~222 MB, deterministic, loadable.
//   npx tsx test/e2e/rpc-worker/large-model.ts --out FILE   → {"path","size","sha256"}
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import { makeTinyLlamaGguf, type TinyLlamaDims } from "../../../sim/gguf/tiny-llama";

export const LARGE_DIMS: TinyLlamaDims = {
  nEmbd: 2560,
  nHead: 20,
  nHeadKv: 20,
  nFf: 4096,
  nLayer: 2,
  nCtx: 256,
};

if (require.main === module) {
  const { values } = parseArgs({ options: { out: { type: "string" } } });
  if (!values.out) throw new Error("usage: large-model.ts --out FILE");
  const bytes = makeTinyLlamaGguf({ dims: LARGE_DIMS });
  fs.writeFileSync(`${values.out}.tmp`, bytes);
  fs.renameSync(`${values.out}.tmp`, values.out);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  console.log(JSON.stringify({ path: values.out, size: bytes.length, sha256 }));
}
