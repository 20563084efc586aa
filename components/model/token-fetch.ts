// The control node's HTTP to the hub under the same token rules as native/model/model-fetch.py
// on the nodes (issue 10 item 10): the token never travels in clear. Over http it goes only to
// loopback or an address of this machine (the simulated cluster's control address is one: the
// sim's bridge lives on this host, so the bytes never leave it); an https URL redirected to
// http is refused; a redirect to another origin (scheme, host, port) goes without the token;
// an endpoint with user-info or a query string is refused. Redirects are followed here, by
// hand (`redirect: "manual"`), so each hop is checked before anything is sent.
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";

export class InsecureEndpointError extends Error {
  override name = "InsecureEndpointError";
}

const MAX_REDIRECTS = 5;

/** Loopback, or an address of one of this machine's interfaces. */
export function isLocalHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h === "::1" || /^127\./.test(h)) return true;
  if (isIP(h) === 0) return false;
  return Object.values(networkInterfaces()).some((list) =>
    (list ?? []).some((a) => a.address.toLowerCase() === h),
  );
}

/**
 * The endpoint URL (sparkform:model.endpoint) as the rules allow it, or an error naming what
 * is wrong and the fix. Shared by the config schema (model/config.ts) and the fetch below.
 */
export function endpointProblem(endpoint: string): string | undefined {
  if (!URL.canParse(endpoint)) return "is not a URL; write it in full, e.g. https://huggingface.co";
  const u = new URL(endpoint);
  if (u.protocol !== "https:" && u.protocol !== "http:") {
    return "must be an http(s) URL; write it in full, e.g. https://huggingface.co";
  }
  if (u.username || u.password) {
    return "has user-info (user:password@); credentials never go in the URL: set the token with `pulumi config set --secret hfToken`";
  }
  if (u.search || u.hash) {
    return "has a query string or fragment; give the endpoint's base URL, e.g. https://huggingface.co";
  }
  return undefined;
}

const origin = (u: URL) => `${u.protocol}//${u.host}`;

/**
 * A fetch for @huggingface/hub and @huggingface/gguf that applies the rules above to every
 * request and every redirect hop. `base` is the fetch to send with (the global one by default).
 */
export function tokenSafeFetch(base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const req = new Request(input, init);
    let url = new URL(req.url);
    // API paths carry query strings of their own (`?recursive=true`): only the endpoint itself
    // (resolveModel, the config schema) must have none.
    if (url.username || url.password || (url.protocol !== "https:" && url.protocol !== "http:")) {
      throw new InsecureEndpointError(
        `the hub URL ${url.protocol}//${url.host} is not an http(s) URL without user-info; refusing it`,
      );
    }
    const headers = new Headers(req.headers);
    const hasToken = headers.has("authorization");
    if (hasToken && url.protocol === "http:" && !isLocalHost(url.hostname)) {
      throw new InsecureEndpointError(
        `refusing to send the hub token over plain http to ${url.host}: it would travel in clear. ` +
          "Use the endpoint's https:// URL in sparkform:model.endpoint",
      );
    }
    const first = origin(url);
    const body =
      req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
    for (let hop = 0; ; hop++) {
      const res = await base(url.href, {
        method: req.method,
        headers,
        ...(body ? { body } : {}),
        redirect: "manual",
        ...(init?.signal ? { signal: init.signal } : {}),
      });
      const location = res.headers.get("location");
      if (res.status < 300 || res.status > 399 || res.status === 304 || !location) return res;
      if (hop >= MAX_REDIRECTS) {
        throw new InsecureEndpointError(`too many redirects from ${first}`);
      }
      const next = new URL(location, url);
      if (next.username || next.password) {
        throw new InsecureEndpointError(
          `${url.host} redirected to a URL with user-info; refusing it`,
        );
      }
      if (url.protocol === "https:" && next.protocol !== "https:") {
        throw new InsecureEndpointError(
          `${url.host} redirected from https to ${next.protocol}//${next.host}: refusing the downgrade ` +
            "(the request and any token would travel in clear); the endpoint must serve https throughout",
        );
      }
      // The token only to the origin it was given for (a CDN gets signed URLs, not the token).
      if (origin(next) !== first) headers.delete("authorization");
      url = next;
    }
  };
}
