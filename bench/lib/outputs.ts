// A stack's outputs for the items that read them (endpoints, the API key, the server's
// readiness): `pulumi stack output --json`, read by the one reader of that text.
import { pulumiText } from "../../cli/stack";
import { parseOutputsRecord } from "../../stack-outputs";

/** Every output of `stack` (`extra`: e.g. `--show-secrets`); an error says how to select it. */
export function outputsOf(stack: string, extra: readonly string[] = []): Record<string, unknown> {
  return parseOutputsRecord(
    pulumiText(["stack", "output", "-s", stack, ...extra], "outputs"),
    stack,
  );
}
