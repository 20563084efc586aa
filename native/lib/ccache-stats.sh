# ccache-stats.sh — run a build with the compiler cache's statistics around it, for the build
# programs in native/build/ (build.sh, command-build.sh). Sourced when a program runs from a
# checkout; inlined in its place when the program is sent to a node (components/native-script.ts).

# with_ccache_stats ARGV...: zero ccache's statistics, run ARGV, then print them after an
# `==> ccache statistics` line (parseCcacheStats() reads them); returns ARGV's exit status.
# Without ccache on the node both ends print nothing and the build runs as is.
with_ccache_stats() {
	ccache -z >/dev/null 2>&1 || true
	"$@"
	rc=$?
	echo "==> ccache statistics"
	ccache --print-stats 2>/dev/null || true
	return $rc
}
