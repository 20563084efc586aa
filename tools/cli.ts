// `npx sparkform <command>`: the project's own CLI. Each command lives in its own module.
import { extractLlamaSource } from "./llama";
import { runSimCli } from "./sim/cli";

const [command, ...rest] = process.argv.slice(2);

async function main(): Promise<number> {
  switch (command) {
    case "sim":
      return runSimCli(rest);
    case "llama-source": {
      // The llama.cpp checkout the local stack syncs and builds (from node-llama-cpp's bundle).
      const dir = rest[0];
      if (!dir) throw new Error("usage: sparkform llama-source <dir>");
      const { commit, tag } = extractLlamaSource(dir);
      process.stdout.write(`llama.cpp ${tag} (${commit}) in ${dir}\n`);
      return 0;
    }
    default:
      process.stderr.write(
        `sparkform: unknown command ${JSON.stringify(command ?? "")}\nusage: sparkform sim <up|status|down|stop|start|link|exec> ... | sparkform llama-source <dir>\n`,
      );
      return 2;
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`sparkform: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
