// Proof stack for the Pulumi toolchain (see ../foundation.test.ts): one dynamic-provider
// resource whose `read` re-measures a file's digest, checked by its own policy pack
// (../proof-policies).
import * as pulumi from "@pulumi/pulumi";
import { ManagedFile } from "./managed-file";

const config = new pulumi.Config();

const file = new ManagedFile("proof-file", {
  path: config.require("file"),
  content: config.require("content"),
  pinnedSha256: config.get("pinnedSha256") ?? "",
});

export const path = file.path;
export const sha256 = file.sha256;
export const size = file.size;
