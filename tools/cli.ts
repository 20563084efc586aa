// `npx sparkform <command>`: the project's own CLI. Each command lives in its own module.
const [command, ...rest] = process.argv.slice(2);

async function main(): Promise<number> {
  switch (command) {
    case "sim": {
      const { runSimCli } = await import("./sim/cli");
      return runSimCli(rest);
    }
    default:
      process.stderr.write(
        `sparkform: unknown command ${JSON.stringify(command ?? "")}\nusage: sparkform sim <up|status|down|stop|start|link|exec> ...\n`,
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
