// The stack config the component tests under Pulumi's mocks start from: two nodes on a LAN, the
// worker on spark-2, the sim build preset. Each test adds what it needs.

/** A well-formed ed25519 host key (never checked under mocks). */
export const PAIR_HOST_KEY =
  "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFCod6bRWGwLtlzntUxO1uJl002LYJe2aeFp5qJjJQNv";

/** `sparkform:*` as parseStackConfig takes it: spark-1 the client, spark-2 the worker. */
export const PAIR_CONFIG = {
  nodes: [
    {
      name: "spark-1",
      host: "192.168.1.4",
      user: "spark",
      fabricAddress: "10.0.0.1",
      hostKey: PAIR_HOST_KEY,
    },
    {
      name: "spark-2",
      host: "192.168.1.5",
      user: "spark",
      fabricAddress: "10.0.0.2",
      hostKey: PAIR_HOST_KEY,
    },
  ],
  tree: { source: "/tmp", dest: "~/src/llama.cpp" },
  build: { preset: "sim" },
  worker: { nodes: ["spark-2"] },
};

/** A resource the mocks' newResource saw. */
export interface Registered {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}

/** The inputs of the resource named `name`, once the mocks have seen it register. */
export function inputsOf(
  registered: readonly Registered[],
  name: string,
): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const t = setInterval(() => {
      const r = registered.find((x) => x.name === name);
      if (r) {
        clearInterval(t);
        resolve(r.inputs);
      }
    }, 5);
  });
}
