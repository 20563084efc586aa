// CLI: serve a repo tree as a Hugging Face-compatible endpoint.
//   npx tsx sim/hub/main.ts --root DIR [--host 127.0.0.1] [--port 0]
//       [--token-file FILE] [--log FILE] [--faults JSON] [--publish-test-model]
// Prints one JSON line {"url", "host", "port", ...} on stdout once listening; stops on SIGTERM/SIGINT.
// The token is read from a file (or $HF_ENDPOINT_TOKEN), never from the command line.
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import { publishStagedTestModel, publishTestModel } from "./repo";
import { HfFaultsSchema, startHfEndpoint } from "./server";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      root: { type: "string" },
      host: { type: "string", default: "127.0.0.1" },
      port: { type: "string", default: "0" },
      "token-file": { type: "string" },
      log: { type: "string" },
      faults: { type: "string" },
      "publish-test-model": { type: "boolean", default: false },
    },
  });
  if (!values.root) {
    console.error(
      "usage: main.ts --root DIR [--host H] [--port P] [--token-file F] [--log F] [--faults JSON] [--publish-test-model]",
    );
    process.exit(2);
  }
  const token = values["token-file"]
    ? fs.readFileSync(values["token-file"], "utf8").trim()
    : process.env.HF_ENDPOINT_TOKEN || undefined;
  const published = values["publish-test-model"] ? publishTestModel(values.root) : undefined;
  // The second model beside it, for a stack that stages two (sparkform:models).
  if (published) publishStagedTestModel(values.root);
  const endpoint = await startHfEndpoint({
    root: values.root,
    host: values.host,
    port: Number(values.port),
    token,
    logFile: values.log,
    faults: values.faults ? HfFaultsSchema.parse(JSON.parse(values.faults)) : undefined,
  });
  console.log(
    JSON.stringify({
      url: endpoint.url,
      host: endpoint.host,
      port: endpoint.port,
      auth: token !== undefined,
      ...(published
        ? {
            repo: published.repo,
            commit: published.commit,
            file: published.model.path,
            sha256: published.model.sha256,
            size: published.model.size,
          }
        : {}),
    }),
  );
  const stop = () => {
    endpoint.close().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
