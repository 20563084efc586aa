// Pulumi's runtime mocks as the component tests use them: every resource registers with its
// inputs as its outputs (plus what a real provider would measure, where a test says so), each
// registration is recorded, and an invoke is a test error (no component here calls one).
import * as pulumi from "@pulumi/pulumi";
import type { Registered } from "./mock-pair";

export interface MockOptions {
  /** The stack name the program sees. */
  stack?: string;
  /** A preview (outputs unknown where the engine would not know them) or an up. */
  preview?: boolean;
  /** Where each registration is recorded, in order (the test reads it). */
  registered?: Registered[];
  /** What a real provider would add to a resource's outputs, by its registration. */
  measured?: (args: pulumi.runtime.MockResourceArgs) => Record<string, unknown>;
}

export function setPulumiMocks(opts: MockOptions = {}): Promise<void> {
  return pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        opts.registered?.push({ type: args.type, name: args.name, inputs: args.inputs });
        return {
          id: `${args.name}-id`,
          state: { ...args.inputs, ...(opts.measured?.(args) ?? {}) },
        };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    opts.stack ?? "test",
    opts.preview ?? false,
  );
}
