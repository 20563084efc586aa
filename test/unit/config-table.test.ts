// The bad-input table for the stack configuration: every field with invalid values (wrong
// types, empty lists, duplicates, an address that is not an IP, a revision that is not a
// commit, a SHA-256 of the wrong length, node paths that are the home or overlap, shell
// metacharacters, leading dashes, rsync filter rules) gives exactly one line, naming the key
// and the fix. Each case is otherwise a valid config, so the line is the only problem.
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  ConfigError,
  NodePathError,
  normaliseNodePath,
  parseStackConfig,
} from "../../components/stack-config";

const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
const n1 = { name: "spark-1", host: "10.0.0.2", user: "spark", hostKey };
const n2 = { name: "spark-2", host: "10.0.0.3", user: "spark", hostKey };
const nodes = [n1, n2];
const tc = {
  path: "~/.asdf",
  binDirs: ["installs/erlang/27/bin"],
  probe: ["erl", "-version"],
  expect: "27",
};
const tree = { source: ".", dest: "~/src/llama.cpp" };
const model = { repo: "org/name", revision: "a".repeat(40), files: ["m.gguf"] };
const withNode = (x: object) => ({ nodes: [{ ...n1, ...x }, n2] });
const withTc = (x: object) => ({ nodes, toolchain: { ...tc, ...x } });
const withTree = (x: object) => ({ nodes, tree: { ...tree, ...x } });
const excl = (e: object) => withTree({ exclude: [{ reason: "r", ...e }] });
const withBuild = (x: object) => ({ nodes, tree, build: { preset: "sim", ...x } });
const withModel = (x: object) => ({ nodes, model: { ...model, ...x } });
/** A worker on spark-2 (client spark-1), both with fabric addresses, unless `over` says so. */
const withWorker = (x: object, over: [object, object] = [{}, {}]) => ({
  nodes: [
    { ...n1, fabricAddress: "192.168.100.1", ...over[0] },
    { ...n2, fabricAddress: "192.168.100.2", ...over[1] },
  ],
  tree,
  build: { preset: "sim" },
  worker: { nodes: ["spark-2"], ...x },
});
/** A server on spark-1, the client of a worker on spark-2 (a server needs its workers). */
const withServer = (x: object) => ({
  ...withWorker({}),
  model,
  server: x,
});
/** Both nodes on one fabric rail, with `x` set on `sparkform:fabric`. */
const withFabric = (x: object) => ({
  nodes,
  fabric: {
    rails: {
      "spark-1": [{ rail: 0, iface: "fabric0", address: "10.214.7.1/24" }],
      "spark-2": [{ rail: 0, iface: "fabric0", address: "10.214.7.2/24" }],
    },
    ...x,
  },
});
/** The hostile inputs the table refused before issue 22's second hardening pass. */
const REFUSED_BEFORE_ISSUE_22 = 112;
const cases: [string, Record<string, unknown>, string][] = [
  [
    "nodes not a list",
    { nodes: "spark-1" },
    'sparkform:nodes: is "spark-1", not a list; write it as a list',
  ],
  [
    "no nodes",
    { nodes: [] },
    "sparkform:nodes: list at least one node; add each node's name, host, user and hostKey",
  ],
  [
    "nine nodes",
    { nodes: Array.from({ length: 9 }, (_, i) => ({ ...n1, name: `s${i}` })) },
    "sparkform:nodes: lists more nodes than the 8 sparkform supports; list at most 8",
  ],
  [
    "node not a map",
    { nodes: ["spark-1"] },
    'sparkform:nodes[0]: is "spark-1", not a map; write it as a map',
  ],
  [
    "name with a space",
    withNode({ name: "spark 1" }),
    "sparkform:nodes[0].name: use letters, digits, '_', '.' and '-' (max 63), starting with a letter or digit; e.g. spark-1",
  ],
  [
    "name with a leading dash",
    withNode({ name: "-spark" }),
    "sparkform:nodes[0].name: use letters, digits, '_', '.' and '-' (max 63), starting with a letter or digit; e.g. spark-1",
  ],
  [
    "duplicate names",
    { nodes: [n1, { ...n2, name: "spark-1" }] },
    'sparkform:nodes: node names must be unique: "spark-1" is given twice; rename one',
  ],
  [
    "host an ssh option",
    withNode({ host: "-oProxyCommand=sh" }),
    'sparkform:nodes[0].host: "-oProxyCommand=sh" is not a hostname, IP address or ssh_config alias; give the node\'s management address (e.g. 10.0.0.2) or a Host alias of the ssh_config',
  ],
  [
    "host with shell",
    withNode({ host: "$(id)" }),
    'sparkform:nodes[0].host: "$(id)" is not a hostname, IP address or ssh_config alias; give the node\'s management address (e.g. 10.0.0.2) or a Host alias of the ssh_config',
  ],
  [
    "host missing",
    { nodes: [{ name: "spark-1", user: "spark", hostKey }] },
    "sparkform:nodes[0].host: is missing; set it to a string",
  ],
  [
    "port a string",
    withNode({ port: "22" }),
    'sparkform:nodes[0].port: is "22", not a number; write it as a number',
  ],
  [
    "port 0",
    withNode({ port: 0 }),
    "sparkform:nodes[0].port: is 0, below the minimum; use 1 or more",
  ],
  [
    "port 70000",
    withNode({ port: 70000 }),
    "sparkform:nodes[0].port: is 70000, above the maximum; use 65535 or less",
  ],
  [
    "port 22.5",
    withNode({ port: 22.5 }),
    "sparkform:nodes[0].port: is 22.5, not an integer; write it as an integer",
  ],
  [
    "user shell",
    withNode({ user: "$(reboot)" }),
    "sparkform:nodes[0].user: is not a valid user name; give the login user on the node (e.g. spark)",
  ],
  [
    "user dash",
    withNode({ user: "-oProxyCommand=x" }),
    "sparkform:nodes[0].user: is not a valid user name; give the login user on the node (e.g. spark)",
  ],
  [
    "hostKey empty",
    withNode({ hostKey: "" }),
    "sparkform:nodes[0].hostKey: must be the node's public host key, '<type> <base64>'; copy it from the node's /etc/ssh/ssh_host_ed25519_key.pub or `ssh-keyscan -t ed25519 <host>` (host key checking is never disabled)",
  ],
  [
    "hostKey dss",
    withNode({ hostKey: "ssh-dss AAAAB3" }),
    "sparkform:nodes[0].hostKey: must be the node's public host key, '<type> <base64>'; copy it from the node's /etc/ssh/ssh_host_ed25519_key.pub or `ssh-keyscan -t ed25519 <host>` (host key checking is never disabled)",
  ],
  [
    "fabric option",
    withNode({ fabricAddress: "-oProxyCommand=x" }),
    'sparkform:nodes[0].fabricAddress: "-oProxyCommand=x" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric with port",
    withNode({ fabricAddress: "192.168.100.11:2222" }),
    'sparkform:nodes[0].fabricAddress: "192.168.100.11:2222" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric host:port",
    withNode({ fabricAddress: "host:2222" }),
    'sparkform:nodes[0].fabricAddress: "host:2222" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric shell",
    withNode({ fabricAddress: "$(id)" }),
    'sparkform:nodes[0].fabricAddress: "$(id)" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric name",
    withNode({ fabricAddress: "spark-2" }),
    'sparkform:nodes[0].fabricAddress: "spark-2" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric brackets",
    withNode({ fabricAddress: "[fd00::11]" }),
    'sparkform:nodes[0].fabricAddress: "[fd00::11]" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric bad v4",
    withNode({ fabricAddress: "192.168.100.300" }),
    'sparkform:nodes[0].fabricAddress: "192.168.100.300" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
  ],
  [
    "fabric number",
    withNode({ fabricAddress: 1 }),
    "sparkform:nodes[0].fabricAddress: is 1, not a string; write it as a string",
  ],
  [
    "unknown node key",
    withNode({ addr: "x" }),
    'sparkform:nodes[0]: Unrecognized key "addr"; fix the name (one of name, host, port, user, hostKey, fabricAddress) or remove it',
  ],
  [
    "sshKeyPath dash",
    { nodes, sshKeyPath: "-oProxyCommand=x" },
    "sparkform:sshKeyPath: starts with '-', which ssh would read as an option; write it as ./-\u2026 or in full",
  ],
  [
    "sshConfigPath newline",
    { nodes, sshConfigPath: "a\nb" },
    "sparkform:sshConfigPath: contains a control character; write the path on one line",
  ],
  [
    "tc.path ~",
    withTc({ path: "~" }),
    'sparkform:toolchain.path: "~" is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tc.path ~/",
    withTc({ path: "~/" }),
    'sparkform:toolchain.path: "~/" is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tc.path ~/.",
    withTc({ path: "~/." }),
    'sparkform:toolchain.path: "~/." is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tc.path ~//",
    withTc({ path: "~//" }),
    'sparkform:toolchain.path: "~//" is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tc.path /",
    withTc({ path: "/" }),
    'sparkform:toolchain.path: "/" is the root directory; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tc.path relative",
    withTc({ path: ".asdf" }),
    "sparkform:toolchain.path: must be absolute or start with ~/; e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp",
  ],
  [
    "tc.path ~user",
    withTc({ path: "~root/.asdf" }),
    "sparkform:toolchain.path: must be absolute or start with ~/; e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp",
  ],
  [
    "tc.path ..",
    withTc({ path: "~/a/../.asdf" }),
    "sparkform:toolchain.path: must not contain '..'; write the directory it means, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp",
  ],
  [
    "tc.path .",
    withTc({ path: "~/a/./b" }),
    "sparkform:toolchain.path: \"~/a/./b\" has an empty or '.' part; write it without '//' and '/./' (~/a/b)",
  ],
  [
    "tc.path //",
    withTc({ path: "~/a//b" }),
    "sparkform:toolchain.path: \"~/a//b\" has an empty or '.' part; write it without '//' and '/./' (~/a/b)",
  ],
  [
    "tc.path shell",
    withTc({ path: "~/x$(id)" }),
    "sparkform:toolchain.path: may contain only letters, digits and . _ / ~ + @ -; rename the directory or pick another",
  ],
  [
    "tc.path dash",
    withTc({ path: "~/-rf" }),
    "sparkform:toolchain.path: has a part starting with '-' (\"-rf\"), which a command would read as an option; rename it",
  ],
  [
    "tc.path tab",
    withTc({ path: "~/a\tb" }),
    'sparkform:toolchain.path: "~/a\\tb" contains a control character; write the path on one line, printable characters only',
  ],
  [
    "tc.path empty",
    withTc({ path: "" }),
    "sparkform:toolchain.path: is empty; give a directory on the node, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp",
  ],
  [
    "tc.source",
    withTc({ source: "spark-9" }),
    'sparkform:toolchain.source: "spark-9" is not one of the nodes (spark-1, spark-2); name the node that has the toolchain, or leave it out for the first node',
  ],
  [
    "binDirs empty",
    withTc({ binDirs: [] }),
    "sparkform:toolchain.binDirs: lists no directory; name the install's bin directories",
  ],
  [
    "binDirs ..",
    withTc({ binDirs: ["../bin"] }),
    "sparkform:toolchain.binDirs[0]: must not contain '..'; stay inside toolchain.path, e.g. installs/elixir/1.18.4-otp-27/bin",
  ],
  [
    "binDirs absolute",
    withTc({ binDirs: ["/usr/bin"] }),
    'sparkform:toolchain.binDirs[0]: "/usr/bin" is absolute; give it relative to toolchain.path, e.g. installs/elixir/1.18.4-otp-27/bin',
  ],
  [
    "binDirs home",
    withTc({ binDirs: ["~/bin"] }),
    "sparkform:toolchain.binDirs[0]: may contain only letters, digits and . _ / + @ -; e.g. installs/elixir/1.18.4-otp-27/bin",
  ],
  [
    "binDirs empty segment",
    withTc({ binDirs: ["a//bin"] }),
    "sparkform:toolchain.binDirs[0]: \"a//bin\" has an empty or '.' part; write it as dir/sub, e.g. installs/elixir/1.18.4-otp-27/bin",
  ],
  [
    "binDirs empty string",
    withTc({ binDirs: [""] }),
    "sparkform:toolchain.binDirs[0]: is empty; give a directory relative to toolchain.path, e.g. installs/elixir/1.18.4-otp-27/bin",
  ],
  [
    "binDirs dash",
    withTc({ binDirs: ["-x/bin"] }),
    "sparkform:toolchain.binDirs[0]: has a part starting with '-', which a command would read as an option; rename it",
  ],
  [
    "binDirs shell",
    withTc({ binDirs: ["b;in"] }),
    "sparkform:toolchain.binDirs[0]: may contain only letters, digits and . _ / + @ -; e.g. installs/elixir/1.18.4-otp-27/bin",
  ],
  [
    "probe empty",
    withTc({ probe: [] }),
    "sparkform:toolchain.probe: needs at least the program, e.g. [elixir, --version]",
  ],
  [
    "probe NUL",
    withTc({ probe: ["erl\0"] }),
    "sparkform:toolchain.probe[0]: contains a NUL byte, which no argv can carry; remove it",
  ],
  [
    "probe a string",
    withTc({ probe: "erl -version" }),
    'sparkform:toolchain.probe: is "erl -version", not a list; write it as a list',
  ],
  [
    "expect empty",
    withTc({ expect: "" }),
    "sparkform:toolchain.expect: is empty; give text the probe prints (e.g. Elixir 1.18)",
  ],
  [
    "tree.source empty",
    withTree({ source: "" }),
    "sparkform:tree.source: is empty; give the directory to sync, relative to the project (e.g. .sparkform/llama.cpp)",
  ],
  [
    "tree.dest ~",
    withTree({ dest: "~" }),
    'sparkform:tree.dest: "~" is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tree.dest /",
    withTree({ dest: "/" }),
    'sparkform:tree.dest: "/" is the root directory; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tree.dest relative",
    withTree({ dest: "src/x" }),
    "sparkform:tree.dest: must be absolute or start with ~/; e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp",
  ],
  [
    "excl path CR",
    excl({ path: "a\rb" }),
    "sparkform:tree.exclude[0].path: contains a control character (\\r, \\n, NUL, \u2026), which rsync and the digest script split or stop at; remove it",
  ],
  [
    "excl path NUL",
    excl({ path: "a\0b" }),
    "sparkform:tree.exclude[0].path: contains a control character (\\r, \\n, NUL, \u2026), which rsync and the digest script split or stop at; remove it",
  ],
  [
    "excl path - ",
    excl({ path: "- x" }),
    "sparkform:tree.exclude[0].path: starts with \"-\", which rsync reads as a filter rule ('!' clears the exclusions, '+ ' includes, '- ' excludes) or an option; exclude it with name: and '?' for that character instead",
  ],
  [
    "excl path wildcard",
    excl({ path: "a/*" }),
    "sparkform:tree.exclude[0].path: is a literal relative path (no wildcards); use name: for a glob",
  ],
  [
    "excl path absolute",
    excl({ path: "/etc" }),
    "sparkform:tree.exclude[0].path: is relative to the tree, without '..'; e.g. build or .git",
  ],
  [
    "excl path ..",
    excl({ path: "../x" }),
    "sparkform:tree.exclude[0].path: is relative to the tree, without '..'; e.g. build or .git",
  ],
  [
    "excl path //",
    excl({ path: "a//b" }),
    "sparkform:tree.exclude[0].path: has an empty or '.' part; write it as dir/sub",
  ],
  [
    "excl name !",
    excl({ name: "!" }),
    "sparkform:tree.exclude[0].name: starts with \"!\", which rsync reads as a filter rule ('!' clears the exclusions, '+ ' includes, '- ' excludes) or an option; match that character with '?' instead",
  ],
  [
    "excl name + ",
    excl({ name: "+ keep" }),
    "sparkform:tree.exclude[0].name: starts with \"+\", which rsync reads as a filter rule ('!' clears the exclusions, '+ ' includes, '- ' excludes) or an option; match that character with '?' instead",
  ],
  [
    "excl name - ",
    excl({ name: "- x" }),
    "sparkform:tree.exclude[0].name: starts with \"-\", which rsync reads as a filter rule ('!' clears the exclusions, '+ ' includes, '- ' excludes) or an option; match that character with '?' instead",
  ],
  [
    "excl name slash",
    excl({ name: "a/b" }),
    "sparkform:tree.exclude[0].name: is a base-name glob with * and ? only; no '/', '[' or '\\' (use path: for a path)",
  ],
  [
    "excl name **",
    excl({ name: "**" }),
    "sparkform:tree.exclude[0].name: has '**', which rsync matches across directories; use a single '*'",
  ],
  [
    "excl name LF",
    excl({ name: "a\nb" }),
    "sparkform:tree.exclude[0].name: contains a control character (\\r, \\n, NUL, \u2026), which rsync and the digest script split or stop at; remove it",
  ],
  [
    "excl name .",
    excl({ name: "." }),
    "sparkform:tree.exclude[0].name: would match the tree itself; name the files or directories to leave out",
  ],
  [
    "excl no reason",
    withTree({ exclude: [{ path: ".git" }] }),
    "sparkform:tree.exclude[0].reason: is missing; say why this is excluded",
  ],
  [
    "excl both",
    excl({ path: "a", name: "b" }),
    "sparkform:tree.exclude[0]: give exactly one of path or name; path: for an anchored path, name: for a base-name glob",
  ],
  [
    "excl neither",
    excl({}),
    "sparkform:tree.exclude[0]: give exactly one of path or name; path: for an anchored path, name: for a base-name glob",
  ],
  [
    "build preset",
    withBuild({ preset: "laptop" }),
    'sparkform:build.preset: is "laptop"; use one of "spark", "sim"',
  ],
  [
    "build cacheFrom",
    withBuild({ cacheFrom: "spark-9" }),
    'sparkform:build.cacheFrom: "spark-9" is not one of the nodes (spark-1, spark-2), nor "none"; name the node whose compiler cache seeds the others, or "none" to build each node on its own',
  ],
  [
    "build commit short",
    withBuild({ commit: "abc" }),
    "sparkform:build.commit: must be the full 40-hex llama.cpp commit; `git rev-parse HEAD` in the tree prints it",
  ],
  [
    "build jobs 0",
    withBuild({ jobs: 0 }),
    "sparkform:build.jobs: is 0, below the minimum; use 1 or more",
  ],
  [
    "build targets shell",
    withBuild({ targets: ["a;b"] }),
    "sparkform:build.targets[0]: is not a cmake target name (letters, digits, _ . + -); e.g. ggml-rpc-server",
  ],
  [
    "build unknown key",
    withBuild({ colour: "red" }),
    'sparkform:build: Unrecognized key "colour"; fix the name (one of preset, flags, targets, artifacts, commit, cacheFrom, jobs, command, distribute) or remove it',
  ],
  [
    "build without tree",
    { nodes, build: { preset: "sim" } },
    "sparkform:build: builds in the synced tree, but sparkform:tree is not set; set sparkform:tree too",
  ],
  [
    "build command output not excluded",
    withBuild({
      command: { run: ["mix", "compile"], buildDir: "_build/obj" },
      artifacts: ["priv/x.so"],
    }),
    'sparkform:build.command: writes _build/obj, priv/x.so in the synced tree, and sparkform:tree.exclude does not exclude it. Without the exclusion every sync deletes the build\'s output (rsync --delete) and refresh reports the tree as drifted. Add to sparkform:tree.exclude: {path: _build, reason: "build output, made on each node"}, {path: priv, reason: "build output, made on each node"}',
  ],
  [
    "model repo",
    withModel({ repo: "not a repo" }),
    "sparkform:model.repo: must be a Hugging Face repo id, 'org/name'; copy it from the model page (e.g. unsloth/Qwen3-235B-A22B-GGUF)",
  ],
  [
    "model revision branch",
    withModel({ revision: "main" }),
    'sparkform:model.revision: "main" is not a commit sha: pin the 40-hex commit (the hub\'s model page lists it), or set allowBranch: true to follow a branch',
  ],
  [
    "model revision dash",
    withModel({ revision: "-x", allowBranch: true }),
    "sparkform:model.revision: starts with '-', which git would read as an option; pin the 40-hex commit",
  ],
  [
    "model revision short sha",
    withModel({ revision: "abc123" }),
    'sparkform:model.revision: "abc123" is not a commit sha: pin the 40-hex commit (the hub\'s model page lists it), or set allowBranch: true to follow a branch',
  ],
  [
    "model sha256 short",
    withModel({ sha256: { "m.gguf": "0".repeat(63) } }),
    "sparkform:model.sha256.m.gguf: must be 64 lowercase hex digits (a SHA-256); copy the file's SHA256 from the hub's file page",
  ],
  [
    "model sha256 other file",
    withModel({ sha256: { "x.gguf": "0".repeat(64) } }),
    "sparkform:model.sha256.x.gguf: names a file that is not in files (m.gguf); add it to files or remove this entry",
  ],
  [
    "model files empty",
    withModel({ files: [] }),
    "sparkform:model.files: lists no file; name the .gguf file(s) of the model",
  ],
  [
    "model files ..",
    withModel({ files: ["../m.gguf"] }),
    "sparkform:model.files[0]: must not contain '.' or '..' segments; write the path as the hub lists it",
  ],
  [
    "model files dash",
    withModel({ files: ["-m.gguf"] }),
    "sparkform:model.files[0]: has a part starting with '-', which a command would read as an option; check the name",
  ],
  [
    "model endpoint ftp",
    withModel({ endpoint: "ftp://x.org" }),
    "sparkform:model.endpoint: must be an http(s) URL; write it in full, e.g. https://huggingface.co",
  ],
  [
    "model endpoint not url",
    withModel({ endpoint: "huggingface" }),
    "sparkform:model.endpoint: must be an http(s) URL; write it in full, e.g. https://huggingface.co",
  ],
  [
    "model verify",
    withModel({ verify: "slow" }),
    'sparkform:model.verify: is "slow"; use one of "fast", "full"',
  ],
  [
    "model retries -1",
    withModel({ retries: -1 }),
    "sparkform:model.retries: is -1, below the minimum; use 0 or more",
  ],
  [
    "model retries 21",
    withModel({ retries: 21 }),
    "sparkform:model.retries: is 21, above the maximum; use 20 or less",
  ],
  [
    "model allowBranch string",
    withModel({ allowBranch: "yes" }),
    'sparkform:model.allowBranch: is "yes", not true or false; write it as true or false',
  ],
  [
    "model modelsDir ~",
    withModel({ modelsDir: "~" }),
    'sparkform:model.modelsDir: "~" is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "model modelsDir ~/",
    withModel({ modelsDir: "~/" }),
    'sparkform:model.modelsDir: "~/" is the home directory itself, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "model nodes unknown",
    withModel({ nodes: ["spark-9"] }),
    'sparkform:model.nodes[0]: "spark-9" is not one of sparkform:nodes (spark-1, spark-2); name one of them, or leave model.nodes out for all nodes',
  ],
  [
    "model nodes duplicate",
    withModel({ nodes: ["spark-1", "spark-1"] }),
    'sparkform:model.nodes[1]: names "spark-1" twice; list each node once',
  ],
  [
    "model nodes empty",
    withModel({ nodes: [] }),
    "sparkform:model.nodes: lists no node; name at least one of sparkform:nodes, or leave it out for all",
  ],
  [
    "model unknown key",
    withModel({ token: "x" }),
    'sparkform:model: Unrecognized key "token"; fix the name (one of repo, revision, files, sha256, allowBranch, endpoint, sendToken, verify, modelsDir, retries, nodes) or remove it',
  ],
  [
    "tree inside models dir",
    { nodes, tree: { ...tree, dest: "~/models/src" }, model },
    'sparkform:model.modelsDir: "~/models" contains sparkform:tree.dest ("~/models/src"), and sparkform syncs, replaces or removes each on its own; give each its own directory, neither inside the other',
  ],
  [
    "toolchain inside tree",
    { nodes, tree, toolchain: { ...tc, path: "~/src/llama.cpp/.asdf" } },
    'sparkform:tree.dest: "~/src/llama.cpp" contains sparkform:toolchain.path ("~/src/llama.cpp/.asdf"), and sparkform syncs, replaces or removes each on its own; give each its own directory, neither inside the other',
  ],
  [
    "same dir twice",
    { nodes, tree, toolchain: { ...tc, path: "~/src/llama.cpp/" } },
    'sparkform:tree.dest: "~/src/llama.cpp" is the same directory as sparkform:toolchain.path ("~/src/llama.cpp"), and sparkform syncs, replaces or removes each on its own; give each its own directory, neither inside the other',
  ],
  [
    "models dir contains toolchain",
    {
      nodes,
      toolchain: { ...tc, path: "~/tools/.asdf" },
      model: { ...model, modelsDir: "~/tools" },
    },
    'sparkform:model.modelsDir: "~/tools" contains sparkform:toolchain.path ("~/tools/.asdf"), and sparkform syncs, replaces or removes each on its own; give each its own directory, neither inside the other',
  ],
  [
    "tree in sparkform's cache",
    withTree({ dest: "~/.cache/sparkform/tree" }),
    'sparkform:tree.dest: "~/.cache/sparkform/tree" is inside ~/.cache/sparkform, sparkform\'s build cache on each node; pick a directory outside it',
  ],
  // Issue 22: node paths that are a home, or above one, by absolute path.
  [
    "tree dest /home/spark",
    withTree({ dest: "/home/spark" }),
    'sparkform:tree.dest: "/home/spark" is a user\'s home directory, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "tree dest /home/spark/",
    withTree({ dest: "/home/spark/" }),
    'sparkform:tree.dest: "/home/spark/" is a user\'s home directory, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "model modelsDir /home",
    withModel({ modelsDir: "/home" }),
    'sparkform:model.modelsDir: "/home" holds every user\'s home directory, which sparkform would sync over or delete; name a directory below one, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  [
    "toolchain path /root",
    withTc({ path: "/root" }),
    'sparkform:toolchain.path: "/root" is root\'s home directory, which sparkform would sync over or delete; name a directory below it, e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp',
  ],
  // Issue 22: the worker's bind (its fabric address) is checked as an address, at preview.
  [
    "worker bind on the management address",
    withWorker({}, [{}, { fabricAddress: "10.0.0.3" }]),
    "sparkform:nodes[1].fabricAddress: the worker on spark-2 binds it, and it must not: 10.0.0.3 is the node's management address (the LAN the control node reaches); give spark-2's fabric address (its own link to the other nodes): ggml-rpc-server has no authentication",
  ],
  [
    "worker bind on the management address, spelled IPv4-mapped",
    withWorker({}, [{}, { host: "::ffff:10.0.0.3", fabricAddress: "10.0.0.3" }]),
    "sparkform:nodes[1].fabricAddress: the worker on spark-2 binds it, and it must not: 10.0.0.3 is the node's management address (::ffff:10.0.0.3) (the LAN the control node reaches); give spark-2's fabric address (its own link to the other nodes): ggml-rpc-server has no authentication",
  ],
  [
    "worker bind loopback",
    withWorker({}, [{}, { fabricAddress: "127.0.0.2" }]),
    "sparkform:nodes[1].fabricAddress: the worker on spark-2 binds it, and it must not: 127.0.0.2 is loopback, and the client is another node; give spark-2's fabric address (its own link to the other nodes): ggml-rpc-server has no authentication",
  ],
  [
    "worker bind wildcard",
    withWorker({}, [{}, { fabricAddress: "0.0.0.0" }]),
    'sparkform:nodes[1].fabricAddress: the worker on spark-2 binds it, and it must not: "0.0.0.0" is the wildcard address (every interface, the LAN included); give spark-2\'s fabric address (its own link to the other nodes): ggml-rpc-server has no authentication',
  ],
  // Issue 22: IPv6 fabric addresses cannot carry ggml-rpc endpoints at the pinned llama.cpp.
  [
    "worker fabric address IPv6",
    withWorker({}, [{}, { fabricAddress: "fd00::12" }]),
    "sparkform:nodes[1].fabricAddress: \"fd00::12\" is IPv6, and spark-2 is in sparkform:worker: the pinned llama.cpp's ggml-rpc splits an endpoint at its first ':', so an IPv6 one (--rpc fd00::12:50052) fails when the model loads; give spark-2 an IPv4 fabric address (e.g. 192.168.100.11) until the pinned llama.cpp parses IPv6 endpoints",
  ],
  [
    "worker client fabric address IPv6",
    withWorker({}, [{ fabricAddress: "fd00::11" }, {}]),
    "sparkform:nodes[0].fabricAddress: \"fd00::11\" is IPv6, and spark-1 is in sparkform:worker: the pinned llama.cpp's ggml-rpc splits an endpoint at its first ':', so an IPv6 one (--rpc fd00::11:50052) fails when the model loads; give spark-1 an IPv4 fabric address (e.g. 192.168.100.11) until the pinned llama.cpp parses IPv6 endpoints",
  ],
  // Issue 22: an RSS guard that stops the worker as soon as it loads its share.
  [
    "worker rssLimitPercent 0.001",
    withWorker({ rssLimitPercent: 0.001 }),
    "sparkform:worker.rssLimitPercent: is 0.001, which stops the worker as soon as it loads: the guard compares the node's whole memory use (the OS included) with it, and a worker holds a share of a model too large for one node (the runbook's 142.1 GB model puts ~71 GB on each 130 GB Spark, 55%); use 50 to 99 (the runbook's guard is 92; a percent, not a fraction), or 0 for no guard, which the rss-guard-on policy refuses",
  ],
  [
    "worker rssLimitPercent a fraction",
    withWorker({ rssLimitPercent: 0.92 }),
    "sparkform:worker.rssLimitPercent: is 0.92, which stops the worker as soon as it loads: the guard compares the node's whole memory use (the OS included) with it, and a worker holds a share of a model too large for one node (the runbook's 142.1 GB model puts ~71 GB on each 130 GB Spark, 55%); use 50 to 99 (the runbook's guard is 92; a percent, not a fraction), or 0 for no guard, which the rss-guard-on policy refuses",
  ],
  // Issue 22 item 14: the client node's guard (llama-server holds most of a split model) has
  // the worker's floor and interval bounds.
  [
    "server rssLimitPercent 0.001",
    withServer({ rssLimitPercent: 0.001 }),
    "sparkform:server.rssLimitPercent: is 0.001, which stops the server as soon as it loads: the guard compares the node's whole memory use (the OS included) with it, and llama-server holds a share of a model too large for one node (the runbook's 142.1 GB model puts ~71 GB on each 130 GB Spark, 55%); use 50 to 99 (the runbook's guard is 92; a percent, not a fraction), or 0 for no guard, which the rss-guard-on policy refuses",
  ],
  [
    "server rssLimitPercent a fraction",
    withServer({ rssLimitPercent: 0.92 }),
    "sparkform:server.rssLimitPercent: is 0.92, which stops the server as soon as it loads: the guard compares the node's whole memory use (the OS included) with it, and llama-server holds a share of a model too large for one node (the runbook's 142.1 GB model puts ~71 GB on each 130 GB Spark, 55%); use 50 to 99 (the runbook's guard is 92; a percent, not a fraction), or 0 for no guard, which the rss-guard-on policy refuses",
  ],
  [
    "server rssLimitPercent over 100",
    withServer({ rssLimitPercent: 150 }),
    "sparkform:server.rssLimitPercent: is 150, above the maximum; use 100 or less",
  ],
  [
    "server rssLimitPercent as text",
    withServer({ rssLimitPercent: "92%" }),
    'sparkform:server.rssLimitPercent: is "92%", not a number; write it as a number',
  ],
  [
    "server rssIntervalSeconds 0",
    withServer({ rssIntervalSeconds: 0 }),
    "sparkform:server.rssIntervalSeconds: is 0, below the minimum; use 0.5 or more",
  ],
  // Issue 22: split shares llama.cpp cannot sum in float32, or renders as 0.
  [
    "server tensorSplit 1e39",
    withServer({ tensorSplit: [1e39, 1], devices: ["CPU", "RPC0"] }),
    "sparkform:server.tensorSplit[0]: is 1e+39; a share is a proportion (e.g. [1, 1] or [0.4, 0.6]): 0 for none, else 0.001 to 1000000 (llama.cpp sums the shares in float32 and gets them with 6 decimals)",
  ],
  [
    "server tensorSplit 1e-9",
    withServer({ tensorSplit: [1e-9, 1], devices: ["CPU", "RPC0"] }),
    "sparkform:server.tensorSplit[0]: is 1e-9; a share is a proportion (e.g. [1, 1] or [0.4, 0.6]): 0 for none, else 0.001 to 1000000 (llama.cpp sums the shares in float32 and gets them with 6 decimals)",
  ],
  // Issue 22: a smoke prompt that the node's command line cannot carry.
  [
    "server smoke prompt 200 KiB",
    withServer({ smoke: { prompt: "x".repeat(200 * 1024) } }),
    "sparkform:server.smoke.prompt: is 204800 bytes, more than the 1024 a smoke prompt may have: it travels on the node's command line, where Linux refuses an argument over 128 KiB (E2BIG) only after the model has loaded; give a sentence, e.g. The capital of France is",
  ],
  // Issue 33: the router lets in only the browser origins it names, literally.
  [
    "router allowedOrigins wildcard",
    withServer({ router: { allowedOrigins: ["*"] } }),

    'sparkform:server.router.allowedOrigins[0]: is "*", not an origin as a browser sends it (scheme://host[:port], lower case, no path, no wildcard), e.g. https://app.example or http://localhost:3000',
  ],
  [
    "router allowedOrigins with a path",
    withServer({ router: { allowedOrigins: ["https://app.example/ui"] } }),

    'sparkform:server.router.allowedOrigins[0]: is "https://app.example/ui", not an origin as a browser sends it (scheme://host[:port], lower case, no path, no wildcard), e.g. https://app.example or http://localhost:3000',
  ],
  [
    "router allowedOrigins subdomain wildcard",
    withServer({ router: { allowedOrigins: ["https://*.app.example"] } }),

    'sparkform:server.router.allowedOrigins[0]: is "https://*.app.example", not an origin as a browser sends it (scheme://host[:port], lower case, no path, no wildcard), e.g. https://app.example or http://localhost:3000',
  ],
  [
    "router allowedOrigins placeholder",
    withServer({ router: { allowedOrigins: ["{http.request.header.Origin}"] } }),

    'sparkform:server.router.allowedOrigins[0]: is "{http.request.header.Origin}", not an origin as a browser sends it (scheme://host[:port], lower case, no path, no wildcard), e.g. https://app.example or http://localhost:3000',
  ],
  [
    "serverApiKey with a Caddy wildcard",
    { ...withServer({}), serverApiKey: "0123456789abcdef*" },
    'sparkform:serverApiKey: contains *, {, } or \\, which the router\'s matcher would read as a wildcard or a placeholder; set a key without them with `pulumi config set --secret sparkform:serverApiKey "$(openssl rand -hex 32)"`',
  ],
  // Issue 25: a refresh's first burst is the short one.
  [
    "fabric probe refreshSeconds above seconds",
    withFabric({ probe: { seconds: 1, refreshSeconds: 2 } }),
    "sparkform:fabric.probe.refreshSeconds: is 2, longer than probe.seconds (1); a refresh's first burst is the short one: use 1 or less",
  ],
  [
    "fabric probe refreshSeconds 0",
    withFabric({ probe: { refreshSeconds: 0 } }),
    "sparkform:fabric.probe.refreshSeconds: is 0, below the minimum; use 0.1 or more",
  ],
  [
    "unknown key",
    { nodes, surprise: 1 },
    "unknown stack configuration sparkform:surprise: sparkform reads sparkform:nodes, sparkform:sshKeyPath, sparkform:sshConfigPath, sparkform:toolchain, sparkform:tree, sparkform:build, sparkform:fabric, sparkform:model, sparkform:models, sparkform:worker, sparkform:server, sparkform:privateKey, sparkform:hfToken, sparkform:serverApiKey. Fix the name, or remove it with `pulumi config rm`.",
  ],
  [
    // What `pulumi config set sparkform:server.model b` makes, without --path.
    "dotted key set without --path",
    { nodes, "server.model": "b" },
    "unknown stack configuration sparkform:server.model: sparkform reads sparkform:nodes, sparkform:sshKeyPath, sparkform:sshConfigPath, sparkform:toolchain, sparkform:tree, sparkform:build, sparkform:fabric, sparkform:model, sparkform:models, sparkform:worker, sparkform:server, sparkform:privateKey, sparkform:hfToken, sparkform:serverApiKey. sparkform:server.model is a key with a dot in the name, set without --path: remove with `pulumi config rm sparkform:server.model` and set it again with `pulumi config set --path sparkform:server.model <value>`.",
  ],
];

function linesOf(raw: Record<string, unknown>): readonly string[] {
  try {
    parseStackConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).lines;
  }
  throw new Error("expected a ConfigError");
}

describe("parseStackConfig: one exact line per bad input", () => {
  it.each(cases)("%s", (_label, raw, line) => {
    expect(linesOf(raw)).toEqual([line]);
  });
  it("counts the hostile inputs refused, each naming its key", () => {
    const keyed = cases.filter(([, , line]) =>
      /^(sparkform:[A-Za-z]|unknown stack configuration sparkform:)/.test(line),
    );
    console.log(
      `hostile config inputs refused: ${REFUSED_BEFORE_ISSUE_22} before issue 22, ${cases.length} now (${keyed.length} naming their key)`,
    );
    expect(keyed.length).toBe(cases.length);
    // 20 from issue 22, 2 from issue 25 (fabric.probe.refreshSeconds), 1 from issue 24 (a
    // dotted key set without --path), 5 from issue 33 (router.allowedOrigins, a key Caddy would
    // read as a wildcard).
    expect(cases.length).toBe(REFUSED_BEFORE_ISSUE_22 + 28);
  });
});

describe("parseStackConfig: defaults, set once", () => {
  it("fills every default and resolves the node references", () => {
    const c = parseStackConfig({
      nodes: [
        { ...n1, fabricAddress: "192.168.100.11" },
        { ...n2, fabricAddress: "fd00::12" },
      ],
      toolchain: { ...tc, path: "~/.asdf/", binDirs: ["installs/erlang/27/bin/", "."] },
      tree,
      build: { preset: "sim" },
      model,
    });
    expect(c.nodes.map((n) => n.port)).toEqual([22, 22]);
    expect(c.toolchain).toEqual({
      ...tc,
      path: "~/.asdf",
      binDirs: ["installs/erlang/27/bin/", "."],
      source: "spark-1",
      binPaths: ["~/.asdf/installs/erlang/27/bin", "~/.asdf"],
    });
    expect(c.tree).toEqual({ ...tree, exclude: [] });
    expect(c.build).toEqual({
      preset: "sim",
      flags: {},
      cacheFrom: "spark-1",
      targets: ["ggml-rpc-server", "llama-completion", "llama-server"],
      artifacts: [
        "bin/ggml-rpc-server",
        "bin/llama-completion",
        "bin/llama-server",
        "ggml/src/libggml-cpu.a",
      ],
      distribute: "build-each",
    });
    expect(c.model).toEqual({
      ...model,
      sha256: {},
      allowBranch: false,
      endpoint: "https://huggingface.co",
      sendToken: false,
      verify: "fast",
      modelsDir: "~/models",
      retries: 2,
      nodes: ["spark-1", "spark-2"],
    });
    expect(c.diskPaths).toEqual(["~/models", "~/src/llama.cpp"]);
  });

  it("fills the fabric probe: 2000 round trips, 2 s, and a 0.2 s burst on refresh", () => {
    expect(parseStackConfig(withFabric({})).fabric?.probe).toEqual({
      count: 2000,
      seconds: 2,
      refreshSeconds: 0.2,
    });
    // The local stack's probe (sim/stack.ts) gets the same burst.
    expect(
      parseStackConfig(withFabric({ probe: { count: 500, seconds: 1 } })).fabric?.probe,
    ).toEqual({ count: 500, seconds: 1, refreshSeconds: 0.2 });
    expect(
      parseStackConfig(withFabric({ probe: { seconds: 0.5, refreshSeconds: 0.5 } })).fabric?.probe,
    ).toEqual({ count: 2000, seconds: 0.5, refreshSeconds: 0.5 });
  });

  it("keeps what is set: cacheFrom none, a source node, model nodes, a models dir", () => {
    const c = parseStackConfig({
      nodes,
      toolchain: { ...tc, source: "spark-2" },
      tree: { ...tree, exclude: [{ path: "_build", reason: "build output" }] },
      build: {
        cacheFrom: "none",
        command: { run: ["mix", "compile"], buildDir: "_build/obj" },
        artifacts: ["_build/nif.so"],
      },
      model: { ...model, nodes: ["spark-2"], modelsDir: "/srv/models/" },
    });
    expect(c.toolchain?.source).toBe("spark-2");
    expect(c.build).toMatchObject({ cacheFrom: "none", targets: [], artifacts: ["_build/nif.so"] });
    expect(c.model).toMatchObject({ nodes: ["spark-2"], modelsDir: "/srv/models" });
    expect(c.diskPaths).toEqual(["/srv/models", "~/src/llama.cpp"]);
  });

  it("ignores unset and empty values, as the sim's stack template has them", () => {
    const c = parseStackConfig({
      nodes,
      sshKeyPath: "",
      sshConfigPath: undefined,
      tree: undefined,
    });
    expect(c).toEqual({
      nodes: nodes.map((n) => ({ ...n, port: 22 })),
      diskPaths: ["~/models", "~"],
    });
  });

  it("with a projectDir, tree.source is resolved and must be a directory", () => {
    const dir = path.resolve(__dirname, "..");
    expect(
      parseStackConfig({ nodes, tree: { ...tree, source: "unit" } }, { projectDir: dir }).tree,
    ).toMatchObject({ source: path.join(dir, "unit") });
    expect(() =>
      parseStackConfig({ nodes, tree: { ...tree, source: "nope" } }, { projectDir: dir }),
    ).toThrow(
      `sparkform:tree.source: "nope" is not a directory (resolved to ${path.join(dir, "nope")}); point it at the working tree to sync`,
    );
  });
});

describe("parseStackConfig: all problems together", () => {
  it("reports field errors, cross-references and unknown keys in one error", () => {
    let err: unknown;
    try {
      parseStackConfig({
        nodes: [n1, { ...n2, fabricAddress: "host:2222" }],
        toolchain: { ...tc, source: "spark-9", probe: [] },
        tree: { ...tree, dest: "~/models/tree" },
        build: { cacheFrom: "spark-7", colour: "red" },
        model: { ...model, revision: "main", nodes: ["spark-1", "spark-1"] },
        surprise: true,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const e = err as ConfigError;
    expect(e.lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^unknown stack configuration sparkform:surprise: /),
        'sparkform:nodes[1].fabricAddress: "host:2222" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
        "sparkform:toolchain.probe: needs at least the program, e.g. [elixir, --version]",
        'sparkform:build: Unrecognized key "colour"; fix the name (one of preset, flags, targets, artifacts, commit, cacheFrom, jobs, command, distribute) or remove it',
        expect.stringMatching(/^sparkform:model\.revision: "main" is not a commit sha/),
        'sparkform:model.nodes[1]: names "spark-1" twice; list each node once',
        expect.stringMatching(/^sparkform:toolchain\.source: "spark-9" is not one of the nodes/),
        expect.stringMatching(/^sparkform:build\.cacheFrom: "spark-7" is not one of the nodes/),
        expect.stringMatching(
          /^sparkform:model\.modelsDir: "~\/models" contains sparkform:tree\.dest/,
        ),
      ]),
    );
    expect(e.lines).toHaveLength(9);
    // One message: each line indented under the heading, then where to fix it.
    expect(e.message).toBe(
      `invalid stack configuration:\n${e.lines.map((l) => `  ${l}`).join("\n")}\n` +
        "Fix it in stacks/Pulumi.<stack>.yaml or with `pulumi config set --path sparkform:<key> <value>`.",
    );
  });
});

// Issue 23: two rules that were missing from the config (one caught only at preview, one only
// by the cluster component).
describe("parseStackConfig: a server needs its workers, and they need fabric addresses", () => {
  it("refuses sparkform:server without sparkform:worker, naming the key and the fix", () => {
    expect(linesOf({ nodes, tree, build: { preset: "sim" }, model, server: {} })).toEqual([
      "sparkform:server: is set, but sparkform:worker is not: llama-server runs as the client of the RPC workers, so without them there is no server to make; set sparkform:worker (e.g. nodes: [spark-2]), or remove sparkform:server (removing it stops and deletes the server)",
    ]);
  });

  it("refuses a worker node without a fabricAddress", () => {
    expect(linesOf(withWorker({}, [{}, { fabricAddress: undefined }]))).toEqual([
      "sparkform:nodes[1].fabricAddress: is not set, and spark-2 runs a worker (sparkform:worker.nodes), which binds only its node's fabric address; give spark-2's fabric IPv4 address (its own link to the other nodes, e.g. 192.168.100.11): ggml-rpc-server has no authentication, so it never binds the LAN",
    ]);
  });

  it("refuses a client node without a fabricAddress, the default client too", () => {
    const line =
      "sparkform:nodes[0].fabricAddress: is not set, and spark-1 is the RPC client (sparkform:worker.client, default the first node), which reaches the workers from its own fabric address; give spark-1's fabric IPv4 address (its own link to the other nodes, e.g. 192.168.100.11): ggml-rpc-server has no authentication, so it never binds the LAN";
    expect(linesOf(withWorker({}, [{ fabricAddress: undefined }, {}]))).toEqual([line]);
    expect(linesOf(withWorker({ client: "spark-1" }, [{ fabricAddress: undefined }, {}]))).toEqual([
      line,
    ]);
  });

  it("reports a fabricAddress that is there but wrong once, by its own schema", () => {
    expect(linesOf(withWorker({}, [{}, { fabricAddress: "spark-2.lan" }]))).toEqual([
      'sparkform:nodes[1].fabricAddress: "spark-2.lan" is not an IP address; give the node\'s fabric IPv4 or IPv6 address, without port or brackets (e.g. 192.168.100.11 or fd00::11)',
    ]);
  });

  it("accepts a server, its worker and both fabric addresses", () => {
    expect(parseStackConfig(withServer({})).server?.node).toBe("spark-1");
  });
});

describe("normaliseNodePath", () => {
  it.each([
    ["~/src/llama.cpp", "home", "~/src/llama.cpp"],
    ["~/src/llama.cpp/", "home", "~/src/llama.cpp"],
    ["/srv/models", "root", "/srv/models"],
    ["~/.asdf", "home", "~/.asdf"],
  ])("%s is %s, canonically %s", (p, base, canonical) => {
    expect(normaliseNodePath(p)).toMatchObject({ base, canonical });
  });

  it.each([
    "~",
    "~/",
    "~/.",
    "~//",
    "/",
    "//",
    "/.",
    "~/a/..",
    "~/a//b",
    "a/b",
    "~/a\u0000b",
    "~/-x",
  ])("refuses %j", (p) => {
    expect(() => normaliseNodePath(p)).toThrow(NodePathError);
  });
});
