// CLI: write the tiny llama test model.
//   npx tsx sim/gguf/make-model.ts --out FILE
// Prints {"path","size","sha256"} as JSON.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { makeTinyLlamaGguf } from "./tiny-llama";

export { makeTinyLlamaGguf } from "./tiny-llama";

/** Write the model to `file` atomically; returns its size and sha256. */
export function writeTinyLlamaGguf(file: string): { path: string; size: number; sha256: string } {
  const bytes = makeTinyLlamaGguf();
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
  return {
    path: path.resolve(file),
    size: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
  };
}

if (require.main === module) {
  const { values } = parseArgs({ options: { out: { type: "string" } } });
  if (!values.out) {
    console.error("usage: make-model.ts --out FILE");
    process.exit(2);
  }
  console.log(JSON.stringify(writeTinyLlamaGguf(values.out)));
}
