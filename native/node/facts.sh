#!/bin/sh
# facts.sh — the SparkNode fact sheet. Runs ON the node (POSIX sh, no bashisms, no python)
# and prints ONE JSON object on stdout; components/node/facts.ts validates it on the
# control node, because this output is untrusted input there.
#
# Usage: facts.sh [DIR...]   free disk space is reported for each DIR (a leading "~/" is
#                            the node's $HOME; relative paths are relative to the working
#                            directory, i.e. $HOME under ssh). A DIR that does not exist yet
#                            is measured at its nearest existing parent.
#
# Environment (all optional):
#   SPARKFORM_SYSFS_ROOT   read sysfs from here instead of /sys (CPU, RDMA, netdevs, driver),
#                          so a fixture tree can supply what a container lacks. The value is
#                          recorded in the output ("sysfsRoot"), which labels such facts.
#   SPARKFORM_IBV_DEVINFO  command used for RDMA active_mtu (default: ibv_devinfo). active_mtu
#                          is not in sysfs; fixtures point this at recorded output.
#   CUDA_HOME              searched for CUDA before /usr/local/cuda.
#
# Rule: a fact that cannot be read is null together with a "reason"; nothing is guessed.
# Memory comes from /proc/meminfo, not nvidia-smi (it prints [N/A] on GB10: unified memory).

set -u
LC_ALL=C
export LC_ALL

SCHEMA_VERSION=1
SYS=${SPARKFORM_SYSFS_ROOT:-/sys}
IBV_DEVINFO=${SPARKFORM_IBV_DEVINFO:-ibv_devinfo}

# JSON encoding: js, jsn, jsfile, num (inlined here when this script is sent to a node).
. "$(dirname -- "$0")/../lib/json.sh"

# readv FILE: the first line of FILE into $V (empty if unreadable). `read` is a builtin,
# which matters for the hundreds of small sysfs files on a real node.
readv() {
	V=
	[ -r "$1" ] || return 1
	IFS= read -r V <"$1" 2>/dev/null || [ -n "$V" ]
}

# ---- identity ------------------------------------------------------------------------

hostname_v=
if readv /proc/sys/kernel/hostname; then hostname_v=$V; else hostname_v=$(uname -n 2>/dev/null); fi
arch_v=$(uname -m 2>/dev/null)
kernel_v=$(uname -r 2>/dev/null)

distro_json() {
	id= ver= pretty=
	if [ ! -r /etc/os-release ]; then
		printf '{"id":null,"versionId":null,"prettyName":null,"reason":"/etc/os-release is missing"}'
		return
	fi
	while IFS= read -r line || [ -n "$line" ]; do
		case $line in
		ID=*) id=${line#ID=} ;;
		VERSION_ID=*) ver=${line#VERSION_ID=} ;;
		PRETTY_NAME=*) pretty=${line#PRETTY_NAME=} ;;
		esac
	done </etc/os-release
	# os-release values may be wrapped in "" or ''.
	for var in id ver pretty; do
		eval "v=\$$var"
		case $v in
		\"*\") v=${v#\"} v=${v%\"} ;;
		\'*\') v=${v#\'} v=${v%\'} ;;
		esac
		eval "$var=\$v"
	done
	reason=null
	[ -n "$id" ] && [ -n "$ver" ] && [ -n "$pretty" ] || reason='"a field is missing from /etc/os-release"'
	printf '{"id":%s,"versionId":%s,"prettyName":%s,"reason":%s}' \
		"$(jsn "$id")" "$(jsn "$ver")" "$(jsn "$pretty")" "$reason"
}

# ---- memory (/proc/meminfo, kB) ------------------------------------------------------

memory_json() {
	total= avail=
	if [ -r /proc/meminfo ]; then
		while read -r key value _unit; do
			case $key in
			MemTotal:) total=$value ;;
			MemAvailable:) avail=$value ;;
			esac
		done </proc/meminfo
	fi
	reason=null
	[ -n "$total" ] && total=$((total * 1024))
	[ -n "$avail" ] && avail=$((avail * 1024))
	[ -n "$total" ] && [ -n "$avail" ] || reason='"MemTotal or MemAvailable missing from /proc/meminfo"'
	printf '{"totalBytes":%s,"availableBytes":%s,"reason":%s}' "$(num "$total")" "$(num "$avail")" "$reason"
}

# ---- CPU clusters --------------------------------------------------------------------

# cpu_list: the cpu numbers present under sysfs, ascending, one per line.
cpu_list() {
	for d in "$SYS"/devices/system/cpu/cpu[0-9]*; do
		[ -d "$d" ] || continue
		n=${d##*/cpu}
		case $n in *[!0-9]*) continue ;; esac
		echo "$n"
	done | sort -n
}

# perf_by FILE-UNDER-cpuN: if every cpu has FILE and the values differ, the cpus with the
# largest value, comma-separated. Empty otherwise (missing somewhere, or all equal).
perf_by() {
	pairs=
	for n in $cpus; do
		readv "$SYS/devices/system/cpu/cpu$n/$1" || return 0
		case $V in '' | *[!0-9]*) return 0 ;; esac
		pairs="$pairs$n $V
"
	done
	printf '%s' "$pairs" | awk '
		NF == 2 { cpu[NR] = $1; val[NR] = $2; if (NR == 1 || $2 > max) max = $2; if (NR == 1 || $2 < min) min = $2 }
		END {
			if (NR == 0 || max == min) exit
			sep = ""
			for (i = 1; i <= NR; i++) if (val[i] == max) { printf "%s%s", sep, cpu[i]; sep = "," }
		}'
}

cpu_json() {
	cpus=$(cpu_list)
	count=0
	for _n in $cpus; do count=$((count + 1)); done
	if [ "$count" -eq 0 ]; then
		printf '{"count":null,"performanceCores":null,"source":null,"reason":%s}' \
			"$(js "no cpu directories under $SYS/devices/system/cpu")"
		return
	fi
	for src in cpu_capacity cpufreq/cpuinfo_max_freq; do
		perf=$(perf_by "$src")
		if [ -n "$perf" ]; then
			printf '{"count":%s,"performanceCores":[%s],"source":"%s","reason":null}' "$count" "$perf" "$src"
			return
		fi
	done
	printf '{"count":%s,"performanceCores":null,"source":null,"reason":%s}' "$count" \
		"$(js "sysfs shows no faster cluster: cpu_capacity and cpufreq/cpuinfo_max_freq are missing or equal on all $count cpus")"
}

# ---- CUDA ----------------------------------------------------------------------------

cuda_json() {
	tried=
	for home in ${CUDA_HOME:+"$CUDA_HOME"} /usr/local/cuda; do
		tried="$tried $home"
		if [ -x "$home/bin/nvcc" ]; then
			ver=$("$home/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release [0-9.]*, V\([0-9][0-9.]*\).*/\1/p' | head -n 1)
			if [ -n "$ver" ]; then
				printf '{"version":%s,"home":%s,"source":%s,"reason":null}' "$(js "$ver")" "$(js "$home")" "$(js "$home/bin/nvcc --version")"
				return
			fi
		fi
		if [ -r "$home/version.json" ]; then
			# {"cuda": {"name": ..., "version": "13.0.1"}, ...}: the first "version" after "cuda".
			ver=$(tr -d '\n' <"$home/version.json" | sed -n 's/.*"cuda"[^}]*"version"[[:space:]]*:[[:space:]]*"\([0-9][0-9.]*\)".*/\1/p')
			if [ -n "$ver" ]; then
				printf '{"version":%s,"home":%s,"source":%s,"reason":null}' "$(js "$ver")" "$(js "$home")" "$(js "$home/version.json")"
				return
			fi
		fi
	done
	printf '{"version":null,"home":null,"source":null,"reason":%s}' \
		"$(js "no nvcc or version.json under:$tried (CUDA_HOME ${CUDA_HOME:+is $CUDA_HOME}${CUDA_HOME:-unset})")"
}

driver_json() {
	if readv "$SYS/module/nvidia/version" && [ -n "$V" ]; then
		printf '{"version":%s,"reason":null}' "$(js "$V")"
	else
		printf '{"version":null,"reason":%s}' "$(js "$SYS/module/nvidia/version is absent (no NVIDIA kernel driver loaded)")"
	fi
}

# ---- RDMA ----------------------------------------------------------------------------

# strip "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"
state_word() {
	printf '%s' "${1#*: }"
}

gids_json() { # $1 = port dir
	sep=
	printf '['
	# Numeric order (a real port has gids/0..255; a glob would give 0,1,10,100,…).
	for idx in $(ls -- "$1/gids" 2>/dev/null | sort -n); do
		case $idx in '' | *[!0-9]*) continue ;; esac
		g=$1/gids/$idx
		readv "$g" || continue
		case $V in '' | 0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
		gid=$V
		readv "$1/gid_attrs/types/$idx" || V=
		type=$V
		readv "$1/gid_attrs/ndevs/$idx" || V=
		ndev=$V
		printf '%s{"index":%s,"gid":%s,"type":%s,"netdev":%s}' "$sep" "$idx" "$(js "$gid")" "$(jsn "$type")" "$(jsn "$ndev")"
		sep=,
	done
	printf ']'
}

active_mtu() { # $1 device, $2 port -> number or empty; sets MTU_REASON
	MTU_REASON=
	if ! command -v "$IBV_DEVINFO" >/dev/null 2>&1; then
		MTU_REASON="$IBV_DEVINFO is not installed, and active_mtu is not in sysfs"
		return
	fi
	m=$("$IBV_DEVINFO" -d "$1" -i "$2" 2>/dev/null | sed -n 's/^[[:space:]]*active_mtu:[[:space:]]*\([0-9][0-9]*\).*/\1/p' | head -n 1)
	[ -n "$m" ] || MTU_REASON="$IBV_DEVINFO -d $1 -i $2 reported no active_mtu"
	printf '%s' "$m"
}

rdma_json() {
	ib=$SYS/class/infiniband
	if [ ! -d "$ib" ]; then
		printf '{"devices":[],"reason":%s}' "$(js "$ib is absent (no RDMA devices or driver)")"
		return
	fi
	sep=
	printf '{"devices":['
	for dev in "$ib"/*; do
		[ -d "$dev" ] || continue
		name=${dev##*/}
		readv "$dev/device/current_link_width" || V=
		lw=$V
		readv "$dev/device/max_link_width" || V=
		mlw=$V
		readv "$dev/device/current_link_speed" || V=
		ls=$V
		for pdir in "$dev"/ports/*; do
			[ -d "$pdir" ] || continue
			port=${pdir##*/}
			case $port in '' | *[!0-9]*) continue ;; esac
			readv "$pdir/state" || V=
			state=$(state_word "$V")
			readv "$pdir/phys_state" || V=
			pstate=$(state_word "$V")
			readv "$pdir/link_layer" || V=
			ll=$V
			readv "$pdir/rate" || V=
			rate=$V
			# The port's netdev: GID 0's netdev (RoCE); else the PCI device's only netdev.
			nd=
			if readv "$pdir/gid_attrs/ndevs/0" && [ -n "$V" ]; then
				nd=$V
			else
				set -- "$dev"/device/net/*
				[ $# -eq 1 ] && [ -e "$1" ] && nd=${1##*/}
			fi
			MTU_REASON=
			mtu=$(active_mtu "$name" "$port")
			[ -n "$mtu" ] || active_mtu "$name" "$port" >/dev/null
			reason=null
			if [ -z "$mtu" ]; then reason=$(js "$MTU_REASON"); elif [ -z "$nd" ]; then reason='"no netdev found for this port"'; fi
			printf '%s{"device":%s,"port":%s,"netdev":%s,"state":%s,"physState":%s,"linkLayer":%s,"rate":%s,"activeMtu":%s,"pcie":{"currentLinkWidth":%s,"maxLinkWidth":%s,"currentLinkSpeed":%s},"gids":%s,"reason":%s}' \
				"$sep" "$(js "$name")" "$port" "$(jsn "$nd")" "$(jsn "$state")" "$(jsn "$pstate")" "$(jsn "$ll")" "$(jsn "$rate")" \
				"$(num "$mtu")" "$(num "$lw")" "$(num "$mlw")" "$(jsn "$ls")" "$(gids_json "$pdir")" "$reason"
			sep=,
		done
	done
	printf '],"reason":null}'
}

# ---- netdevs -------------------------------------------------------------------------

addresses_json() { # $1 netdev; sets ADDR_REASON; prints a JSON array or null
	ADDR_REASON=
	if [ -n "${SPARKFORM_SYSFS_ROOT:-}" ]; then
		ADDR_REASON="sysfs comes from $SYS (fixture): addresses are only read from the live kernel"
		printf 'null'
		return
	fi
	if ! command -v ip >/dev/null 2>&1; then
		ADDR_REASON="ip (iproute2) is not installed"
		printf 'null'
		return
	fi
	sep=
	printf '['
	for a in $(ip -o addr show dev "$1" 2>/dev/null | awk '$3 == "inet" || $3 == "inet6" { print $4 }'); do
		printf '%s%s' "$sep" "$(js "$a")"
		sep=,
	done
	printf ']'
}

netdevs_json() {
	sep=
	printf '['
	for d in "$SYS"/class/net/*; do
		[ -e "$d" ] || continue
		name=${d##*/}
		[ "$name" = lo ] && continue
		readv "$d/address" || V=
		mac=$V
		readv "$d/mtu" || V=
		mtu=$V
		readv "$d/operstate" || V=
		oper=$V
		# speed: unreadable (EINVAL) when down or virtual; -1 when unknown.
		readv "$d/speed" || V=
		speed=$V
		virtual=true
		[ -e "$d/device" ] && virtual=false
		# Called in a subshell for its output; again in this shell for ADDR_REASON when null.
		ADDR_REASON=
		addrs=$(addresses_json "$name")
		[ "$addrs" = null ] && addresses_json "$name" >/dev/null
		reasons=
		[ "$(num "$speed")" = null ] && reasons="speed not reported by the driver (usual when down, virtual or paravirtual)"
		[ -n "$ADDR_REASON" ] && reasons="${reasons:+$reasons; }$ADDR_REASON"
		printf '%s{"name":%s,"mac":%s,"mtu":%s,"speedMbps":%s,"operstate":%s,"virtual":%s,"addresses":%s,"reason":%s}' \
			"$sep" "$(js "$name")" "$(jsn "$mac")" "$(num "$mtu")" "$(num "$speed")" "$(jsn "$oper")" "$virtual" "$addrs" \
			"$(if [ -n "$reasons" ]; then js "$reasons"; else printf null; fi)"
		sep=,
	done
	printf ']'
}

# ---- disk ----------------------------------------------------------------------------

disk_json() {
	sep=
	printf '['
	for want in "$@"; do
		p=$want
		case $p in "~") p=$HOME ;; "~/"*) p=$HOME/${p#"~/"} ;; esac
		exists=true
		[ -e "$p" ] || exists=false
		while [ ! -e "$p" ]; do
			parent=$(dirname -- "$p")
			[ "$parent" = "$p" ] && break
			p=$parent
		done
		free= total= reason=null
		# GNU stat -f: %a blocks available to unprivileged users, %b total, %S block size.
		set -- $(stat -f -c '%a %b %S' -- "$p" 2>/dev/null)
		if [ $# -eq 3 ]; then
			free=$(($1 * $3)) total=$(($2 * $3))
		else
			set -- $(df -Pk -- "$p" 2>/dev/null | awk 'NR == 2 { print $4, $2 }')
			if [ $# -eq 2 ]; then free=$(($1 * 1024)) total=$(($2 * 1024)); else reason=$(js "neither stat -f nor df could measure $p"); fi
		fi
		printf '%s{"path":%s,"checkedPath":%s,"exists":%s,"freeBytes":%s,"totalBytes":%s,"reason":%s}' \
			"$sep" "$(js "$want")" "$(js "$p")" "$exists" "$(num "$free")" "$(num "$total")" "$reason"
		sep=,
	done
	printf ']'
}

# ---- the sheet -----------------------------------------------------------------------

# Built in a variable and printed at once: a failure half-way prints nothing partial.
out=$(
	printf '{"schemaVersion":%s,"sysfsRoot":%s' "$SCHEMA_VERSION" "$(js "$SYS")"
	printf ',"hostname":%s,"arch":%s,"kernel":%s' "$(jsn "$hostname_v")" "$(jsn "$arch_v")" "$(jsn "$kernel_v")"
	printf ',"distro":%s' "$(distro_json)"
	printf ',"memory":%s' "$(memory_json)"
	printf ',"cpu":%s' "$(cpu_json)"
	printf ',"cuda":%s' "$(cuda_json)"
	printf ',"nvidiaDriver":%s' "$(driver_json)"
	printf ',"rdma":%s' "$(rdma_json)"
	printf ',"netdevs":%s' "$(netdevs_json)"
	printf ',"disk":%s}' "$(disk_json "$@")"
) || exit 1
printf '%s\n' "$out"
