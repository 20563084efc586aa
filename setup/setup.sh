#!/usr/bin/env bash
# npm run setup: make a Pulumi CLI, its Node.js language host and the Node launchers available
# to `npm run pulumi` and the tests, offline; and build the router (Caddy) for this machine.
#
# A user's own `pulumi` (>= the pinned SDK version, with its language host beside it) is used
# as it is. Otherwise the CLI and language host are built from their Go modules through the Go
# module proxy (pinned in setup/*/go.mod) into a cache directory keyed by everything that goes
# into them, so a second run takes seconds. The result is recorded in .sparkform/toolchain.env,
# which setup/pulumi/env.ts reads.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tools="$repo/setup"
# shellcheck source=versions.env
. "$tools/versions.env"
state="$repo/.sparkform"
cache="${SPARKFORM_CACHE_DIR:-$HOME/.cache/sparkform}"
mkdir -p "$state"

say() { printf 'setup: %s\n' "$*"; }
fail() {
  printf 'setup: error: %s\n' "$*" >&2
  exit 1
}

version_ge() { # version_ge A B: A >= B (dotted numbers, leading v ignored)
  [ "$(printf '%s\n%s\n' "${1#v}" "${2#v}" | sort -V | head -n1)" = "${2#v}" ]
}

record() { # record SOURCE BINDIR VERSION
  local tmp="$state/toolchain.env.tmp"
  printf 'SPARKFORM_PULUMI_SOURCE=%s\nSPARKFORM_PULUMI_BIN_DIR=%s\nSPARKFORM_PULUMI_VERSION=%s\n' \
    "$1" "$2" "$3" >"$tmp"
  mv "$tmp" "$state/toolchain.env"
  say "pulumi $3 ($1) in $2"
}

# Debian packages, the missing ones, as root (a warning naming them otherwise). Sets `installed`
# to what this run installed, so that what it does after touches only those.
installed=""
apt_updated=""
missing_packages() { # missing_packages PACKAGE...: those not installed, space-separated
  # Installed means "ii": dpkg -s also succeeds for a package removed with its config files kept.
  for p in "$@"; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || printf '%s ' "$p"
  done
}
apt_install() { # apt_install PACKAGE...
  local missing
  missing=$(missing_packages "$@")
  installed=""
  [ -n "$missing" ] || return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "warning: missing Debian packages (install them as root): $missing"
    return 0
  fi
  say "installing Debian packages: $missing"
  if [ -z "$apt_updated" ]; then
    apt-get update -qq || return 1
    apt_updated=1
  fi
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null || return 1
  installed=${missing% }
}

# 0. Debian packages the control node runs: ssh and rsync (the transport), python3 (the tree
#    digest), a C/C++ toolchain with cmake and ccache (host builds of llama.cpp for the tests),
#    openssh-server (the transport's tests start a throwaway sshd), a font for the fabric
#    picture's text. The simulated cluster installs its own (debootstrap, systemd-container).
control_packages="openssh-client openssh-server rsync python3 git curl g++ make cmake ninja-build ccache binutils fonts-dejavu-core"
# shellcheck disable=SC2086
apt_install $control_packages || fail "apt-get could not install the control packages (its error is above); fix apt (network, sources) and run setup again"

# Debian packages whose maintainer scripts start a system service and enable it for the next
# boot: the tests start their own on loopback ports and stop them after, and on the control host
# a system one would take the port a user's own server expects and serve nothing of ours. So
# during the install policy-rc.d refuses every start (unless one is there already: a
# container's), and after it the units this run installed are disabled.
# apt_install_stopped WHAT_FOR PACKAGE...: fails naming the packages and what needs them.
apt_install_stopped() {
  local what_for=$1 policy=/usr/sbin/policy-rc.d own_policy="" failed=""
  shift
  if [ "$(id -u)" -eq 0 ] && [ ! -e "$policy" ] && [ -n "$(missing_packages "$@")" ]; then
    # Left behind, it would keep every service on this host from starting: removed on any exit.
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\n# sparkform setup/setup.sh: no service starts while it installs %s; removed after\nexit 101\n' "$*" >"$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  apt_install "$@" || failed=1
  if [ -n "$own_policy" ]; then
    rm -f "$policy"
    trap - EXIT
  fi
  [ -z "$failed" ] || fail "apt-get could not install $* (its error is above); $what_for: fix apt and run setup again"
  for service in $installed; do
    if [ -d /run/systemd/system ]; then
      systemctl disable --now "$service.service" >/dev/null 2>&1 || true
    elif [ -x "/etc/init.d/$service" ]; then
      invoke-rc.d "$service" stop >/dev/null 2>&1 || true
      update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
  done
}

# 0b. Prometheus (bookworm's carries promtool) and node_exporter, for monitoring/ and its tests,
#     which start their own on loopback ports and stop them after.
apt_install_stopped "the monitoring tests need promtool, prometheus and prometheus-node-exporter" \
  prometheus prometheus-node-exporter
[ -z "$installed" ] || say "$installed: installed, system services left stopped and disabled (monitoring/README.md: point your own Prometheus at monitoring/)"

# 0c. PostgreSQL, for a team's stack state (Pulumi's postgres backend, issue 36): its tests start
#     their own cluster (initdb, pg_ctl; test/support/postgres.ts) in a temporary directory on
#     loopback and remove it after; the package's own cluster stays stopped and disabled.
apt_install_stopped "the team backend's tests need initdb, pg_ctl and psql" postgresql
[ -z "$installed" ] || say "$installed: installed, its system cluster left stopped and disabled (the tests start their own)"

# The router (Caddy, components/router/) for this machine's architecture, built from its Go
# modules (setup/router/) into "$cache/router" by the same code `up` uses, so the key is the one
# `up` computes. Run whichever way the Pulumi CLI was found; without Go it is only a warning (a
# node's `up` needs Go then).
router_prebuild() {
  if ! PATH="/usr/local/go/bin:$PATH" command -v go >/dev/null 2>&1; then
    say "warning: router (Caddy) not built: Go is missing (install Go >= 1.21; \`up\` builds it then)"
    return 0
  fi
  if [ ! -d "$repo/node_modules/esbuild" ]; then
    say "warning: router (Caddy) not built: run npm install first"
    return 0
  fi
  say "router: caddy for $(uname -m) (cached, else built from setup/router: minutes on 2 cores)"
  # Through the loader the providers use (components/ts/require.js), not tsx: tsx's CommonJS
  # hook cannot resolve execa's ESM-only dependencies (unicorn-magic has no "require" export).
  PATH="/usr/local/go/bin:$PATH" node -e 'const [l, f] = process.argv.splice(1, 2); require(l).register(); require(f)' \
    "$repo/components/ts/require.js" "$tools/router/prebuild.ts" ||
    say "warning: router (Caddy) not built (the error is above); \`up\` tries again when it needs it"
}
# A `sparkform` command on PATH (setup/install-launcher.sh): `npx sparkform` costs ~1 s before
# the CLI starts, this launcher a few milliseconds. Never fatal.
launcher() {
  local dir="$HOME/.local/bin"
  [ "$(id -u)" -ne 0 ] || dir=/usr/local/bin
  sh "$tools/install-launcher.sh" "$dir" "$repo" ||
    say "warning: the sparkform launcher was not installed (the error is above); \`npx sparkform\` still works"
}
finish() {
  launcher
  router_prebuild
  exit 0
}

# 1. A suitable CLI already on PATH?
if [ -z "${SPARKFORM_BUILD_PULUMI:-}" ] && user_pulumi=$(command -v pulumi 2>/dev/null); then
  user_version=$(pulumi version 2>/dev/null || true)
  user_dir=$(dirname "$(readlink -f "$user_pulumi")")
  if version_ge "$user_version" "$PULUMI_VERSION" && [ -x "$user_dir/pulumi-language-nodejs" ]; then
    record user "$user_dir" "${user_version#v}"
    finish
  fi
  say "ignoring $user_pulumi ($user_version): need >= v$PULUMI_VERSION with pulumi-language-nodejs beside it"
fi

# 2. Go, to build from modules. The machine images have it; install Debian's only if missing.
export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null 2>&1; then
  say "go not found; installing Debian's golang-go"
  if [ "$(id -u)" -ne 0 ]; then fail "Go is missing and installing it needs root: apt-get install golang-go (or install the Pulumi CLI: https://www.pulumi.com/docs/install/)"; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
go_version=$(go env GOVERSION)
# go.mod files say go 1.25; Go >= 1.21 fetches that toolchain from the module proxy itself.
version_ge "${go_version#go}" "1.21" || fail "$go_version is too old to build Pulumi $PULUMI_VERSION; need Go >= 1.21"

# 3. Cached build, keyed by the pinned module files, the launchers and the Go version.
key=$(cd "$tools" && cat versions.env language-nodejs/main.go \
  pulumi-cli/go.mod pulumi-cli/go.sum language-nodejs/go.mod language-nodejs/go.sum \
  language-nodejs-upstream/go.mod language-nodejs-upstream/go.sum launchers/* |
  { cat; echo "$go_version $(go env GOOS GOARCH)"; } | sha256sum | cut -c1-16)
bin="$cache/pulumi/v$PULUMI_VERSION-$key/bin"
if [ -x "$bin/pulumi" ] && [ -x "$bin/pulumi-language-nodejs" ]; then
  say "cached build reused"
  record built "$bin" "$PULUMI_VERSION"
  finish
fi

work=$(mktemp -d "$cache/pulumi/.build-XXXXXX" 2>/dev/null || { mkdir -p "$cache/pulumi" && mktemp -d "$cache/pulumi/.build-XXXXXX"; })
trap 'rm -rf "$work"' EXIT
export GOFLAGS="-mod=mod -trimpath"
version_flag="-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
start=$SECONDS
say "building pulumi v$PULUMI_VERSION from github.com/pulumi/pulumi/pkg/v3 (several minutes on 2 cores)"
(cd "$tools/pulumi-cli" && go build -ldflags "$version_flag=v$PULUMI_VERSION" -o "$work/pulumi" \
  github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
say "building the Node.js language host (upstream from sdk/v3 v$LANGUAGE_NODEJS_UPSTREAM_SDK, wrapped)"
(cd "$tools/language-nodejs-upstream" && go build -ldflags "$version_flag=v$LANGUAGE_NODEJS_UPSTREAM_SDK" \
  -o "$work/pulumi-language-nodejs-upstream" github.com/pulumi/pulumi/sdk/v3/nodejs/cmd/pulumi-language-nodejs)
(cd "$tools/language-nodejs" && go build -o "$work/pulumi-language-nodejs" .)
cp -P "$tools"/launchers/* "$work/"
say "built in $((SECONDS - start)) s"

mkdir -p "$(dirname "$bin")"
rm -rf "$bin"
mv "$work" "$bin"
trap - EXIT
record built "$bin" "$PULUMI_VERSION"
finish
