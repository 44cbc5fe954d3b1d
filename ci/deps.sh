#!/usr/bin/env bash
# Installs (as root, with apt) every tool the test suite runs. ci/test.sh calls it
# when it runs as root on a machine with apt-get; without them the tests that need
# a tool are skipped, each naming the package.
#   tmux: the terminal test of the shell; iproute2, iputils-ping, tcpdump, ethtool:
#   namespace tests; arping, ping: the ARP/ICMP pipeline; qemu-system-x86,
#   busybox-static, cpio: the e1000 guest (ci/vm/run); curl, wget, wrk, ab
#   (apache2-utils), nginx and python3: the kernel peers of our TCP; iperf3:
#   traffic through the forwarding pipelines; traceroute: the router's hops;
#   tshark (editcap comes with it): capture checks; dpdk, dpdk-dev (dpdk-telemetry.py) and
#   prometheus (promtool): the telemetry clients; strace: the system calls of the
#   lcores (lcore_syscalls_root); bird2: a routing daemon filling the kernel table
#   core/netlink follows (follow_bird_root); nftables, conntrack: Linux's masquerade
#   and its connection table beside nat44 (nat_root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    tmux iproute2 iputils-ping arping tcpdump tshark ethtool curl wget python3 \
    qemu-system-x86 busybox-static cpio wrk apache2-utils nginx-light iperf3 \
    traceroute dpdk dpdk-dev prometheus strace bird2 nftables conntrack >/dev/null
