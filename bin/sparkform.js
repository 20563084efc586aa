#!/usr/bin/env node
// The project's CLI is TypeScript; tsx compiles it on the fly so there is no build step.
require("tsx/cjs");
require("../cli/main.ts");
