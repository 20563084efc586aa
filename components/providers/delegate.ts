// Dynamic providers whose methods live in ordinary modules.
//
// Pulumi serializes a dynamic provider's methods into state and runs them in a separate
// process (also for `refresh` and `destroy`, from the copy in state). Serializing real code
// that way captures whole module graphs by value. Instead each provider here is a thin
// object whose methods load one implementation module by absolute path — the only thing
// captured is that path — after registering tsx so the TypeScript loads in plain node.
// The path is the checkout's; a checkout that moved needs one `pulumi up` (which rewrites
// the provider in state) before `refresh` or `destroy` find it again.
import type * as pulumi from "@pulumi/pulumi";

/** What an implementation module exports: plain-typed CRUD, as dynamic providers take. */
export interface ProviderImpl<I, O> {
  create(inputs: I): Promise<pulumi.dynamic.CreateResult<O>>;
  read?(id: string, props: O): Promise<pulumi.dynamic.ReadResult<O>>;
  diff?(id: string, olds: O, news: I): Promise<pulumi.dynamic.DiffResult>;
  update?(id: string, olds: O, news: I): Promise<pulumi.dynamic.UpdateResult<O>>;
  delete?(id: string, props: O): Promise<void>;
  check?(olds: I, news: I): Promise<pulumi.dynamic.CheckResult<I>>;
}

/** A provider that forwards every method to the module at `implFile` (absolute path). */
export function delegatingProvider(implFile: string): pulumi.dynamic.ResourceProvider {
  // These functions are serialized: they may refer only to `implFile` and to each other.
  const load = (): ProviderImpl<unknown, unknown> => {
    // execa is an ES module: load it with node's own require(esm) first, because tsx's CommonJS
    // hook would compile it to CommonJS and then fail on its dependencies' import-only exports.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require("execa");
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require("tsx/cjs");
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(implFile) as ProviderImpl<unknown, unknown>;
  };
  const missing = (method: string) =>
    new Error(`${implFile} does not implement ${method}; this is a sparkform bug`);
  return {
    create: (inputs) => load().create(inputs),
    read: async (id, props) => {
      const impl = load();
      return impl.read ? impl.read(id, props) : { id, props };
    },
    diff: async (id, olds, news) => {
      const impl = load();
      return impl.diff ? impl.diff(id, olds, news) : {};
    },
    update: async (id, olds, news) => {
      const impl = load();
      if (!impl.update) throw missing("update");
      return impl.update(id, olds, news);
    },
    delete: async (id, props) => {
      const impl = load();
      if (impl.delete) await impl.delete(id, props);
    },
    check: async (olds, news) => {
      const impl = load();
      return impl.check ? impl.check(olds, news) : { inputs: news };
    },
  };
}
