// The stack's API key on its way to a node: never in an argv or a plain output. It travels as
// SPARKFORM_API_KEY in the transport's secret preamble (stdin), which start.sh (llama-server)
// and router/files.sh (Caddy) turn into a 0600 file; state keeps only its sha256, as a secret
// output, so a changed key is seen without the key.
import { createHash } from "node:crypto";

/** sha256 of the key ("" = none): what state keeps to see a changed key. */
export const keyDigest = (k: string | undefined): string =>
  k ? createHash("sha256").update(k).digest("hex") : "";

/** The run option that hands a node program the key through the secret preamble. */
export const apiKeyEnv = (k: string | undefined) =>
  k ? { env: { SPARKFORM_API_KEY: { secret: k } } } : {};
