#!/bin/sh
# Two "hosts" on one machine for the multi-host MPI tests (mpi_netns_test.cc):
# each host is a network namespace with an address of its own, joined by a
# veth pair, a host name of its own (a UTS namespace) and, where the test
# asks, directories of its own (bind mounts in a mount namespace), so that a
# path can hold different files on each host, as on two machines.
#
#   netns_hosts.sh up DIR NAME      make namespaces NAMEa (10.77.0.1) and NAMEb
#                                   (10.77.0.2); write DIR/hostfile (4 slots
#                                   each) and DIR/netns; exit 1 with the
#                                   reason when the machine does not allow it
#   netns_hosts.sh on DIR a|b CMD   run the shell command CMD on host a or b:
#                                   host name netns-a / netns-b, and every
#                                   "SRC DST" line of DIR/mounts.a|b bound
#   netns_hosts.sh agent DIR IP CMD...
#                                   Open MPI's plm_rsh_agent ("ssh IP CMD"):
#                                   runs the orted command on the host of IP
#   netns_hosts.sh down DIR         delete the namespaces (idempotent)
#
# The addresses are the same in every run: each pair of namespaces is a
# network of its own. NAME makes the namespaces' names unique per run.
# Requires root, ip (iproute2) and unshare (util-linux).
set -eu

usage() { echo "usage: netns_hosts.sh up|on|agent|down DIR ..." >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
dir=$2
shift 2

# on_host HOST CMD: CMD in HOST's namespaces (HOST is a or b).
on_host() {
  host=$1
  cmd=$2
  name=$(cat "$dir/netns")
  mounts="$dir/mounts.$host"
  [ -f "$mounts" ] || mounts=/dev/null
  exec ip netns exec "$name$host" unshare --uts --mount --propagation private \
    sh -c 'hostname "$1" && while read -r src dst; do mount --bind "$src" "$dst" || exit 1; done < "$2" && exec sh -c "$3"' \
    sh "netns-$host" "$mounts" "$cmd"
}

case $action in
  up)
    [ $# -eq 1 ] || usage
    name=$1
    if [ "$(id -u)" != 0 ]; then echo "not root" >&2; exit 1; fi
    for tool in ip unshare; do
      command -v "$tool" > /dev/null || { echo "no $tool on PATH" >&2; exit 1; }
    done
    echo "$name" > "$dir/netns"
    ip netns add "${name}a" || { echo "ip netns add ${name}a failed" >&2; exit 1; }
    ip netns add "${name}b" || { ip netns del "${name}a"; echo "ip netns add ${name}b failed" >&2; exit 1; }
    if ! { ip link add jp0 netns "${name}a" type veth peer name jp0 netns "${name}b" &&
           ip -n "${name}a" addr add 10.77.0.1/24 dev jp0 &&
           ip -n "${name}b" addr add 10.77.0.2/24 dev jp0 &&
           for h in a b; do ip -n "$name$h" link set jp0 up && ip -n "$name$h" link set lo up; done; }; then
      ip netns del "${name}a"; ip netns del "${name}b"
      echo "could not connect ${name}a and ${name}b with a veth pair" >&2
      exit 1
    fi
    printf '10.77.0.1 slots=4\n10.77.0.2 slots=4\n' > "$dir/hostfile"
    ;;
  on)
    [ $# -eq 2 ] || usage
    on_host "$1" "$2"
    ;;
  agent)
    [ $# -ge 2 ] || usage
    ip=$1
    shift
    case $ip in
      10.77.0.1) on_host a "$*" ;;
      10.77.0.2) on_host b "$*" ;;
      *) echo "netns_hosts.sh agent: unknown host $ip" >&2; exit 1 ;;
    esac
    ;;
  down)
    name=$(cat "$dir/netns" 2> /dev/null) || exit 0
    for h in a b; do
      if ip netns list | grep -q "^$name$h\b"; then ip netns del "$name$h"; fi
    done
    ;;
  *) usage ;;
esac
