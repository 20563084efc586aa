// The APIs a served endpoint speaks besides OpenAI's chat completions: the Anthropic Messages API
// and the OpenAI Responses API, which the pinned llama-server serves (tools/server/server.cpp
// registers POST /v1/messages and /v1/responses). The smoke asks each one token
// (native/serving/smoke.py --apis); the verdict here is what state and `sparkform status` keep:
// the HTTP status and what it means, never the answer's text nor its timing, so the evidence
// does not move unless the build does.
import type { ApiProbe, ApiVerdict, ServedApi } from "./state";

/** Per API: its name for people, its route, and the type field its own answer carries. */
export const SERVED_APIS: Readonly<
  Record<ServedApi, { name: string; path: string; type: string; sdk: string }>
> = {
  messages: {
    name: "Anthropic Messages",
    path: "/v1/messages",
    type: "message",
    sdk: "the Anthropic SDK",
  },
  responses: {
    name: "OpenAI Responses",
    path: "/v1/responses",
    type: "response",
    sdk: "the OpenAI SDK's responses.create",
  },
};

const SERVED = Object.keys(SERVED_APIS) as ServedApi[];

/**
 * Each probe's verdict: 200 with the API's own answer (its type field) is supported; 404 is a
 * build without the route, said and passed. Anything else is a failure, in words: a route the
 * build has that refuses a one-token request would refuse its clients the same way.
 */
export function apiVerdicts(probes: Readonly<Record<ServedApi, ApiProbe>>): {
  apis: Record<ServedApi, ApiVerdict>;
  failures: string[];
} {
  const apis = {} as Record<ServedApi, ApiVerdict>;
  const failures: string[] = [];
  for (const api of SERVED) {
    const { name, path, type, sdk } = SERVED_APIS[api];
    const p = probes[api];
    if (p.status === 404) {
      apis[api] = { verdict: "not served", status: 404 };
      continue;
    }
    if (p.status === 200 && p.type === type) {
      apis[api] = { verdict: "supported", status: 200 };
      continue;
    }
    const said =
      p.status === 200
        ? `answered 200 without its own answer (type ${JSON.stringify(p.type)}, not "${type}")`
        : `answered ${p.status || "nothing"}${p.error ? `: ${p.error.trim().slice(0, 500)}` : ""}`;
    failures.push(
      `the ${name} API (POST ${path}, one token) ${said}. The server's build has the route (a build ` +
        `without it answers 404, which only \`sparkform status\` notes), so ${sdk} would be refused ` +
        "the same way. Check the server's log for that request and that the model has a chat " +
        "template, then `up` again.",
    );
  }
  return { apis, failures };
}

/**
 * The APIs a server speaks, for status: OpenAI's chat completions (the smoke's own proof), then
 * each verdict with its HTTP status; a server whose smoke predates the check says so.
 */
export function describeApis(apis: Partial<Record<ServedApi, ApiVerdict>> | undefined): string {
  const known = SERVED.map((api) => {
    const v = apis?.[api];
    if (!v) return undefined;
    const { name, path } = SERVED_APIS[api];
    return v.verdict === "supported"
      ? `${name} (${path}, ${v.status})`
      : `${name} not served by this build (${path} answered ${v.status})`;
  });
  if (known.every((x) => x === undefined))
    return (
      "OpenAI chat completions; the Anthropic Messages and OpenAI Responses APIs not checked " +
      "(this server's smoke predates the check: it runs at the server's next start)"
    );
  return ["OpenAI chat completions", ...known.filter((x) => x !== undefined)].join(", ");
}
