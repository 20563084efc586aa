# user-unit.sh — what a node program needs to run a sparkform user unit from a non-login ssh
# session: the user's manager kept after the session (linger), its bus, the unit's file, the
# kernel's socket table, and which stack a unit belongs to. Sourced by native/unit/start.sh, stop.sh and
# native/router/files.sh; inlined when a program is sent to a node (components/native-script.ts).

# user_bus: XDG_RUNTIME_DIR exported (the user's /run/user/UID unless already set: a non-login
# ssh session under `env -i` has none).
user_bus() {
	XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/run/user/$(id -u)}
	export XDG_RUNTIME_DIR
}

# user_manager: linger on, XDG_RUNTIME_DIR exported, wait up to 30 s for the manager's bus;
# exit 8 without one.
user_manager() {
	loginctl enable-linger "$(id -un)" 2>/dev/null || true
	user_bus
	_i=0
	until [ -S "$XDG_RUNTIME_DIR/bus" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 60 ] || { echo "no user manager bus at $XDG_RUNTIME_DIR/bus after 30 s (linger on?)" >&2; exit 8; }
		sleep 0.5
	done
}

# port_listening PORT: true when something listens on TCP PORT (IPv4 or IPv6).
port_listening() {
	_hex=$(printf '%04X' "$1")
	awk -v p=":$_hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p' /proc/net/tcp /proc/net/tcp6 | grep -q .
}

# wait_port_free PORT TRIES: wait TRIES × 0.5 s for nothing to listen on PORT; false if it stays.
wait_port_free() {
	_i=0
	while port_listening "$1"; do
		_i=$((_i + 1))
		[ "$_i" -le "$2" ] || return 1
		sleep 0.5
	done
}

# Which stack a unit belongs to. start.sh records it as the unit's Description, "sparkform
# WHAT of stack OWNER" (OWNER = <project>/<stack>): unit names carry only the port, so two
# stacks serving on one node and port would otherwise stop and replace each other's units.
# unit_owner UNIT: the recorded owner, or nothing (no such unit loaded, or one an older
# sparkform started without a record: the stack that starts it next adopts it).
unit_owner() {
	user_bus
	_d=$(systemctl --user show -p Description --value "$1.service" 2>/dev/null || true)
	case $_d in "sparkform "*" of stack "?*) printf '%s\n' "${_d##* of stack }" ;; esac
}

# other_owner UNIT OWNER [WAS]: true, with OTHER_OWNER set, when UNIT records a stack other
# than OWNER (and WAS, this stack's name before a rename); false for this stack's own unit, one
# with no record, or no OWNER (a caller from before owners were recorded).
other_owner() {
	OTHER_OWNER=""
	[ -n "$2" ] || return 1
	OTHER_OWNER=$(unit_owner "$1")
	[ -n "$OTHER_OWNER" ] && [ "$OTHER_OWNER" != "$2" ] && [ "$OTHER_OWNER" != "${3:-}" ]
}

# refuse_other_owner UNIT OWNER NODE PORT_KEY [WAS]: exit 10 when another stack's unit holds
# UNIT's name (its port on this node), before anything is stopped or written (stdout
# otherOwner=STACK, stderr why and the fix).
refuse_other_owner() {
	other_owner "$1" "$2" "${5:-}" || return 0
	echo "otherOwner=$OTHER_OWNER"
	echo "$1 on $3 belongs to stack $OTHER_OWNER, not this stack ($2), so nothing was stopped or written: give this stack another port (pulumi config set --path $4 <port>) or run \`pulumi destroy\` on stack $OTHER_OWNER first" >&2
	exit 10
}

# record_owner UNIT DESCRIPTION: a loaded unit's Description set live, without a restart (how
# a unit an older sparkform started, or one of a renamed stack, is adopted); false when UNIT is
# not loaded or systemd refused.
record_owner() {
	[ "$(systemctl --user show -p LoadState --value "$1.service" 2>/dev/null)" = loaded ] || return 1
	systemctl --user set-property --runtime "$1.service" "Description=$2" 2>/dev/null
}

# A unit's file. One that must come back after a reboot (the worker, the server, the router and
# their guards) lives in the user's configuration and is enabled (WantedBy=default.target, which
# the lingering manager reaches at boot); one that must not outlive the boot (the smoke's
# reference) lives in the runtime directory, which the boot empties. Both are on the manager's
# search path. The first line marks the file as sparkform's: only such a file is ever removed.
UNIT_MARK="# sparkform unit: written by native/unit/start.sh, removed by native/unit/stop.sh"

# user_unit_dir boot|runtime: the directory the unit file goes to (user_bus first).
user_unit_dir() {
	if [ "$1" = boot ]; then
		printf '%s\n' "$HOME/.config/systemd/user"
	else
		printf '%s\n' "${XDG_RUNTIME_DIR:-/run/user/$(id -u)}/systemd/user"
	fi
}

# forget_unit NAME: its live changes reverted, disabled and its file removed from either
# directory, only when sparkform wrote it (UNIT_MARK); the caller reloads the manager
# (`systemctl --user daemon-reload`).
forget_unit() {
	# What record_owner set live (`set-property --runtime`, a drop-in under the runtime's
	# user.control) would outlive the file, keeping the unit loaded with this stack's record: the
	# next stack on the port would read it as still held.
	systemctl --user revert "$1.service" >/dev/null 2>&1 || true
	_f="$(user_unit_dir boot)/$1.service"
	if [ "$(head -n 1 "$_f" 2>/dev/null)" = "$UNIT_MARK" ]; then
		systemctl --user disable "$1.service" >/dev/null 2>&1 || true
		rm -f -- "$_f" "$(user_unit_dir boot)/default.target.wants/$1.service"
	fi
	_f="$(user_unit_dir runtime)/$1.service"
	if [ "$(head -n 1 "$_f" 2>/dev/null)" = "$UNIT_MARK" ]; then rm -f -- "$_f"; fi
	# The directories the first unit file made, once empty (a node's own are never empty).
	_d=$(user_unit_dir boot)
	rmdir -- "$_d/default.target.wants" "$_d" "${_d%/user}" "${_d%/systemd/user}" 2>/dev/null || true
}
