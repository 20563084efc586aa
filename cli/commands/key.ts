// `sparkform key`: the stack's API key, printed to stdout and nothing else, for a client to take
// (`export OPENAI_API_KEY=$(sparkform key --stack S)`). Every stack has one (issue 33): the
// secret sparkform:serverApiKey, else the key the stack made at its first `up` (a ServerApiKey
// resource); either way the stack output `serverApiKey`, a secret. It is read here with
// `pulumi stack output --show-secrets`, whose stdout only this process reads: the key is never
// in an argv, never cached (.sparkform/cache holds outputs read without --show-secrets, where
// it is "[secret]"), and never in a message.
import { parseArgs } from "node:util";
import { UsageError } from "../errors";
import { projectRoot, pulumiJson } from "../stack";
import { selectedStackName } from "../stack-cache";

export const summary = "print the stack's API key (for OPENAI_API_KEY), and nothing else";
export const usage = `usage: sparkform key [--stack S]
  Prints the key every llama-server and the router of the stack check (the secret
  sparkform:serverApiKey, else the one the stack made at its first \`pulumi up\`) to stdout,
  and nothing else:
    export OPENAI_API_KEY=$(sparkform key --stack S)
  --stack S   the stack (default: the selected one)`;

/** The key in `pulumi stack output --show-secrets --json`'s value; an error never holds it. */
export function apiKeyOf(outputs: unknown, stack: string | undefined): string {
  const key = (outputs as { serverApiKey?: unknown } | null)?.serverApiKey;
  const which = stack ? `stack ${stack}` : "the selected stack";
  if (key === undefined)
    throw new Error(
      `${which} has no API key yet (no serverApiKey in its outputs: it was made before every stack had one, ` +
        "or serves nothing): run `pulumi up`, which makes one (or uses the secret sparkform:serverApiKey)",
    );
  if (typeof key !== "string" || !/^\S+$/.test(key) || key === "[secret]")
    throw new Error(
      `${which}'s serverApiKey output is not a key (${typeof key === "string" ? `${key.length} characters` : typeof key}): run \`pulumi up\` again`,
    );
  return key;
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { stack: { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0)
    throw new UsageError(`unexpected ${JSON.stringify(positionals[0])}: give --stack S or nothing`);
  const dir = projectRoot();
  const stack = values.stack ?? selectedStackName(dir);
  const outputs = pulumiJson(
    ["stack", "output", "--show-secrets", ...(stack ? ["-s", stack] : [])],
    "API key",
    dir,
  );
  process.stdout.write(`${apiKeyOf(outputs, stack)}\n`);
  return 0;
}
