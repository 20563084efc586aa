// `npm run setup` (setup/setup.sh): build the router (Caddy, components/router/artifact.ts) for
// this machine's architecture into the cache, so CI's cache holds it and a first `up` against a
// node of the same architecture copies it at once. Prints what it does, as setup.sh does.
import * as os from "node:os";
import { routerBinary } from "../../components/router/artifact";

const arch = process.argv[2] ?? (os.arch() === "arm64" ? "aarch64" : "x86_64");
const start = Date.now();
routerBinary({ arch, progress: (l) => void process.stdout.write(`setup: ${l}\n`) }).then(
  (a) => {
    process.stdout.write(
      `setup: router caddy ${a.version} linux/${a.arch} ready in ${((Date.now() - start) / 1000).toFixed(0)} s: ${a.path}\n`,
    );
  },
  (err: unknown) => {
    process.stderr.write(`setup: error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
