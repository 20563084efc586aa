# user-unit.sh — what a node program needs to run a `systemd-run --user` unit from a non-login
# ssh session: the user's manager kept after the session (linger), its bus, and the kernel's
# socket table. Sourced by native/serving/*.sh and native/rpc-worker/start.sh; inlined when a program is sent to a node
# (components/native-script.ts).

# user_manager: linger on, XDG_RUNTIME_DIR exported, wait up to 30 s for the manager's bus;
# exit 8 without one.
user_manager() {
	loginctl enable-linger "$(id -un)" 2>/dev/null || true
	XDG_RUNTIME_DIR="/run/user/$(id -u)"
	export XDG_RUNTIME_DIR
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
