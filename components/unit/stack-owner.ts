// The owner a resource of this program records on its node's units (issue 33 item 8): the
// project and the stack, as the engine names them. Separate from owner.ts so that a resource's
// constructor (program side) does not load the providers' transport.
import * as pulumi from "@pulumi/pulumi";
import { unitOwnerOf } from "./commands";

/** `<project>/<stack>` of the running program (pulumi.getProject(), pulumi.getStack()). */
export const stackOwner = (): string => unitOwnerOf(pulumi.getProject(), pulumi.getStack());
