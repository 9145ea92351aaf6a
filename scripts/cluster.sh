#!/bin/sh
# cluster.sh runs a command on a cluster of several "hosts" on this one
# machine: each host is a set of Linux namespaces (UTS: its own hostname;
# net: its own interfaces; mount: its own /etc/hosts) held open by a
# sleeping process. Every host has a veth into a bridge that lives in a
# "switch" namespace of its own, with a private address (10.77.0.N/24), so
# that the hosts' traffic never leaves the machine and nothing is added to
# the machine's own network namespace. The command runs inside the first
# host, with Open MPI pointed at a launch agent (plm_rsh_agent) that starts
# mpirun's daemons in the other hosts with nsenter instead of ssh, and with
# its TCP traffic pinned to the bridge's subnet. Ranks on different hosts
# then talk over TCP, ranks on one host over shared memory, as on a real
# cluster. Everything is torn down when the command ends, also on failure.
#
# Usage:
#   scripts/cluster.sh [--hosts a:2,b:2] -- COMMAND [ARGS...]
#   scripts/cluster.sh kill HOST [NAME]   (from inside a cluster's command)
#
# The command sees SYNCGEN_CLUSTER_HOSTS (the --hosts list, Open MPI's own
# --host syntax), SYNCGEN_CLUSTER_DIR (the cluster's state),
# SYNCGEN_NET_IFACE=eth0 (the runtime counts the bytes across hosts on it)
# and the OMPI_MCA_* variables below, so that a plain
#   mpirun --allow-run-as-root --host "$SYNCGEN_CLUSTER_HOSTS" ./model_sync
# or `syncgen run --hosts "$SYNCGEN_CLUSTER_HOSTS" model.sync` spans the
# hosts. When the command ends, each host's bytes sent and received on
# eth0 during it are printed (to standard error). `kill HOST` sends SIGKILL to the processes called NAME (default
# orted: the host's Open MPI daemon) in HOST, as a lost node would.
#
# It needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN), unshare and nsenter
# (util-linux) and ip (iproute2). Without them it says why and exits with
# status 77, which the tests take as "skip, with this reason".
set -eu

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# cannot reports that the cluster cannot be made here, and why.
cannot() {
	echo "cluster.sh: cannot make a cluster here: $*" >&2
	exit 77
}

# killin HOLDER [NAME] sends SIGKILL to the processes (called NAME, or all)
# that share HOLDER's UTS namespace, but for HOLDER, and prints how many.
# It refuses a namespace that is not a cluster host's own: the machine's
# UTS namespace holds every other process of the machine.
killin() {
	uts=$(readlink "/proc/$1/ns/uts") || { echo 0; return 0; }
	if [ "$uts" = "$(readlink /proc/1/ns/uts)" ] || [ "$uts" = "$(readlink /proc/$$/ns/uts)" ]; then
		echo "cluster.sh: refusing to kill in $uts: not a cluster host's namespace" >&2
		echo 0
		return 0
	fi
	killed=0
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" != "$1" ] || continue
		[ "$(readlink "$p/ns/uts" 2>/dev/null)" = "$uts" ] || continue
		[ -z "${2:-}" ] || [ "$(cat "$p/comm" 2>/dev/null)" = "$2" ] || continue
		kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
	done
	echo $killed
}

if [ "${1:-}" = "kill" ]; then
	[ $# -ge 2 ] || die "usage: cluster.sh kill HOST [NAME]"
	dir=${SYNCGEN_CLUSTER_DIR:-}
	[ -n "$dir" ] && [ -f "$dir/hosts/$2.pid" ] || die "kill $2: no such host in this cluster (SYNCGEN_CLUSTER_DIR=${dir:-unset})"
	killed=$(killin "$(cat "$dir/hosts/$2.pid")" "${3:-orted}")
	echo "cluster.sh: killed $killed process(es) called ${3:-orted} on host $2" >&2
	[ "$killed" -gt 0 ]
	exit
fi

hosts="a:2,b:2"
while [ $# -gt 0 ]; do
	case $1 in
	--hosts) [ $# -ge 2 ] || die "--hosts needs a list, e.g. --hosts a:2,b:2"; hosts=$2; shift 2 ;;
	--hosts=*) hosts=${1#--hosts=}; shift ;;
	--) shift; break ;;
	*) die "unexpected argument $1; usage: cluster.sh [--hosts a:2,b:2] -- COMMAND [ARGS...]" ;;
	esac
done
[ $# -gt 0 ] || die "no command given; usage: cluster.sh [--hosts a:2,b:2] -- COMMAND [ARGS...]"

[ "$(id -u)" -eq 0 ] || cannot "it needs root (namespaces, veth pairs, a bridge); run it as root"
for tool in unshare nsenter ip; do
	command -v $tool >/dev/null 2>&1 || cannot "$tool not found; install util-linux and iproute2 (make setup does)"
done

# Every item is NAME or NAME:SLOTS, as Open MPI's --host takes them: an
# empty item or bad slots would pass through to mpirun.
case ",$hosts," in
*,,*) die "--hosts $hosts: an empty item; want NAME[:SLOTS],..., e.g. --hosts a:2,b:2" ;;
esac
names=""
n=0
for h in $(echo "$hosts" | tr ',' ' '); do
	name=${h%%:*}
	case $name in
	'' | *[!a-z0-9-]* | -*) die "--hosts $hosts: host name '$name': use lower-case letters, digits and '-'" ;;
	esac
	# A host's name is its hostname: at most 63 characters (a DNS label).
	[ ${#name} -le 63 ] || die "--hosts $hosts: host name '$name' is longer than 63 characters"
	if [ "$h" != "$name" ]; then
		slots=${h#*:}
		case $slots in
		'' | *[!0-9]* | 0*) die "--hosts $hosts: host $name: slots '$slots': want a number from 1 to 4096, e.g. $name:2" ;;
		esac
		[ "$slots" -le 4096 ] || die "--hosts $hosts: host $name: slots '$slots': want a number from 1 to 4096, e.g. $name:2"
	fi
	case " $names " in *" $name "*) die "--hosts $hosts: host $name given twice" ;; esac
	names="$names $name"
	n=$((n + 1))
done
[ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "--hosts $hosts: want 1 to 200 hosts"

dir=$(mktemp -d /tmp/syncgen-cluster.XXXXXX)
mkdir "$dir/hosts"
holders=""     # every namespace holder, the switch's too
hostholders="" # the hosts' holders: each in a UTS namespace of its own
cleanup() {
	status=$?
	trap - EXIT INT TERM
	# No process of the job outlives the cluster: a rank whose daemon died
	# would otherwise run on. Killing a holder then frees its namespaces
	# (nothing else is in them): its veth, and the switch's end of it, go
	# with its net namespace.
	for p in $hostholders; do killin "$p" >/dev/null; done
	for p in $holders; do kill -KILL "$p" 2>/dev/null || true; done
	for p in $holders; do
		while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	done
	rm -rf "$dir"
	exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# hold starts a sleeping process in new namespaces and prints its PID.
hold() {
	unshare "$@" sleep infinity >/dev/null 2>&1 &
	echo $!
}

switch=$(hold --net)
holders="$switch"
sleep 0.1
kill -0 "$switch" 2>/dev/null || cannot "unshare --net failed (no CAP_SYS_ADMIN, or namespaces are off in this container)"
nsenter -t "$switch" --net ip link add br0 type bridge 2>/dev/null || cannot "ip link add ... type bridge failed in a network namespace"
nsenter -t "$switch" --net ip link set br0 up

# /etc/hosts for every host: the cluster's names first, then the machine's.
{
	i=0
	for name in $names; do
		i=$((i + 1))
		echo "10.77.0.$i $name"
	done
	cat /etc/hosts
} >"$dir/etc-hosts"

i=0
for name in $names; do
	i=$((i + 1))
	pid=$(hold --uts --net --mount --propagation private)
	holders="$holders $pid"
	hostholders="$hostholders $pid"
	sleep 0.05
	kill -0 "$pid" 2>/dev/null || cannot "unshare --uts --net --mount failed"
	echo "$pid" >"$dir/hosts/$name.pid"
	nsenter -t "$pid" --uts hostname "$name"
	nsenter -t "$pid" --mount mount --bind "$dir/etc-hosts" /etc/hosts
	nsenter -t "$pid" --net ip link set lo up
	# The switch's end is named by the host's number, not its name: an
	# interface's name takes at most 15 characters.
	nsenter -t "$pid" --net ip link add eth0 type veth peer name "sw$i" netns "/proc/$switch/ns/net" ||
		cannot "ip link add ... type veth failed"
	nsenter -t "$pid" --net ip addr add "10.77.0.$i/24" dev eth0
	nsenter -t "$pid" --net ip link set eth0 up
	nsenter -t "$switch" --net ip link set "sw$i" master br0 up
done

# The launch agent: Open MPI's rsh launcher runs AGENT HOST COMMAND, where
# COMMAND is a line for the remote shell; it runs in HOST's namespaces.
cat >"$dir/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
if [ ! -f "$dir/hosts/\$host.pid" ]; then
	echo "cluster.sh agent: no host \$host in this cluster (hosts:$names)" >&2
	exit 255
fi
exec nsenter -t "\$(cat "$dir/hosts/\$host.pid")" --uts --net --mount -- /bin/sh -c "\$*"
EOF
chmod +x "$dir/agent"

# counters HOLDER prints the bytes received and sent on eth0 of the host
# that HOLDER holds, from /proc/net/dev as a process in the host's network
# namespace reads it (/sys/class/net in the hosts is the machine's: sysfs
# is not mounted again, since Open MPI's hwloc reads the machine's /sys).
counters() {
	nsenter -t "$1" --net cat /proc/net/dev | awk '$1 == "eth0:" { print $2, $10 }'
}

first=${names# }
first=${first%% *}
head=$(cat "$dir/hosts/$first.pid")
for name in $names; do
	counters "$(cat "$dir/hosts/$name.pid")" >"$dir/hosts/$name.net0"
done
echo "cluster.sh: hosts$names on 10.77.0.0/24 ($hosts); running in $first: $*" >&2
# Not exec: the trap must run when the command ends.
set +e
nsenter -t "$head" --uts --net --mount --wd="$(pwd)" -- env \
	SYNCGEN_CLUSTER_DIR="$dir" \
	SYNCGEN_CLUSTER_HOSTS="$hosts" \
	OMPI_MCA_plm_rsh_agent="$dir/agent" \
	OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 \
	OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 \
	SYNCGEN_NET_IFACE=eth0 \
	"$@"
status=$?
set -e
# What crossed between the hosts during the command, launch included:
# every byte on a host's eth0 went to or came from another host.
for name in $names; do
	read -r rx0 tx0 <"$dir/hosts/$name.net0" || continue
	now=$(counters "$(cat "$dir/hosts/$name.pid")") || continue
	rx1=${now% *}
	tx1=${now#* }
	case "$rx0 $tx0 $rx1 $tx1" in *[!0-9\ ]* | "   ") continue ;; esac
	echo "cluster.sh: host $name: eth0 sent $((tx1 - tx0)) bytes, received $((rx1 - rx0)) bytes during the command (frames, the launch included)" >&2
done
exit $status
