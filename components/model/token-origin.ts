// Which models sparkform:hfToken goes to (issue 33 item 10). The token is given for one origin:
// sparkform:model's endpoint, which is the public hub unless the stack says otherwise. A staged
// model (sparkform:models) may name another endpoint, a third-party mirror say; the token goes
// there only when that model opts in with `sendToken: true`. Origins are compared as URLs
// (scheme, host, port: `https://huggingface.co.evil.example` is not the hub), never as string
// prefixes. Model (model.ts) applies this once, so neither the resolve on the control node nor
// the download on the node (HF_TOKEN) ever sees a token that was withheld.
import { MODEL_ENDPOINT_DEFAULT } from "./config";

/** `scheme://host[:port]` of a URL, the default port left out; undefined when not a URL. */
function originOf(url: string): string | undefined {
  return URL.canParse(url) ? new URL(url).origin : undefined;
}

/**
 * Whether the token goes to a model at `endpoint`: yes when the endpoint has the origin the
 * token is for (`origin`: sparkform:model.endpoint, default the public hub), or the model opts in
 * (`sendToken`). A URL that does not parse gets no token.
 */
export function tokenFor(
  endpoint: string,
  sendToken: boolean,
  origin: string = MODEL_ENDPOINT_DEFAULT,
): boolean {
  const own = originOf(endpoint);
  if (own === undefined) return false;
  return sendToken || own === originOf(origin);
}

/**
 * What an error from an endpoint that wants a token (HTTP 401/403) adds when the token was
 * withheld from it: why, and the opt-in on the model's own key (`models.<name>`).
 */
export function withheldNote(key: string, endpoint: string, origin: string): string {
  const at = originOf(endpoint) ?? endpoint;
  return (
    `sparkform:hfToken was withheld: the endpoint ${at} is not ${originOf(origin) ?? origin}, ` +
    `the origin the token is for. If this endpoint should have it, set sendToken: true on ` +
    `sparkform:${key} (the token then goes to ${at})`
  );
}
