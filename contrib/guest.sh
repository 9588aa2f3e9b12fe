#!/usr/bin/env bash
# A Debian guest with the kernel sites run: systemd as PID 1, cgroup v2, two NUMA nodes and
# two hardware threads per core (qemu: 2 sockets x 2 cores x 2 threads, 1.5 GiB per NUMA node),
# and memory tiers: three NUMA nodes without CPUs, which ACPI's HMAT describes (nodes 2 and 3,
# 256 MiB each, 40 GB/s from package 0's and package 1's CPUs against their DRAM's 10; node 4,
# 512 MiB, 5 GB/s from package 0's).
# The image is built once with mmdebstrap from Debian's packages and cached outside the tree,
# keyed by its package list; every boot writes to a throw-away overlay.
#
# Usage: contrib/guest.sh image                 build the image when missing; prints its folder
#        contrib/guest.sh start RUN SHARE...    boot it; RUN is a fresh state folder; each SHARE
#                                               (TAG=HOSTDIR) is mounted in the guest at HOSTDIR
#                                               (read-only); waits until ssh answers
#        contrib/guest.sh ssh RUN CMD...        run CMD in the guest as root
#        contrib/guest.sh stop RUN              power it off (then kill qemu), remove RUN's overlay
# Environment: LAMA_GUEST_DIST (the Debian release: bookworm, Debian 12 with Slurm 22.05, the
#   default; or trixie, Debian 13 with Slurm 24.11, systemd 257 and kernel 6.12),
#   LAMA_GUEST_CACHE (where images live, default /var/cache/lama/guest),
#   LAMA_GUEST_ACCEL (kvm or tcg; default: kvm when qemu starts with /dev/kvm and the guest
#   boots in 2 minutes, else tcg), LAMA_GUEST_TCG_THREAD (multi, the default, or single: every
#   vCPU on one host thread, which QEMU 7.2's cross-vCPU code-patching defect cannot hit),
#   LAMA_GUEST_PORT (the first host port to try for the guest's ssh, default 2222),
#   LAMA_GUEST_EXTRA (more Debian packages in the image, or "schedmd": what SchedMD's expect and
#   Python tests need (tests/schedmd/); an image of its own, cached like the others).
#
# /dev/kvm may exist and still not boot Debian's kernel (a nested PVM device fails on
# `-cpu host`; here qemu 7.2 aborts at once, "failed to set MSR 0x10a"): then TCG runs it,
# slowly (ssh answers 2-3 minutes after start). Under TCG the vendor must be Intel, or the
# guest shows no hardware threads.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_GUEST_CACHE:-/var/cache/lama/guest}
port=${LAMA_GUEST_PORT:-2222}
dist=${LAMA_GUEST_DIST:-bookworm}
cmdline=()
common=(linux-image-amd64 systemd systemd-sysv dbus udev openssh-server slurm-wlm slurm-client
  munge hwloc numactl bpftool procps iproute2 python3)
case $dist in
  bookworm)
    release=12
    packages=("${common[@]}" libpmix2
      # What the host-built flux-core (contrib/flux-build.sh, shared read-only) needs to run here.
      libzmq5 libjansson4 liblz4-1 libarchive13 libsqlite3-0 lua5.3 liblua5.3-0 lua-posix
      libpython3.11 python3-cffi python3-ply python3-yaml jq
      # What the host-built crun (contrib/crun-build.sh, shared read-only) needs, and a static
      # shell for its containers' root (tests/guest/suite.sh).
      libyajl2 busybox-static) ;;
  # A site as Debian 13 ships it: Slurm 24.11 from the distribution, run by its own units; the
  # host-built lama command runs here on hwloc 2.12.
  # Kernel 6.12 under TCG can lose a halted vCPU's one-shot timer wakeup (RCU stalls, a boot
  # that hangs): a periodic tick on every CPU recovers from that.
  # jq, libyajl2 and busybox-static: the host-built crun's containers (tests/guest/suite.sh);
  # squashfs-tools, zstd and libbsd0 (and jq) the host-built enroot's (tests/guest/pyxis.sh).
  trixie) release=13 packages=("${common[@]}" jq libyajl2 busybox-static charliecloud-runtime
    squashfs-tools zstd libbsd0)
    cmdline=(nohz=off) ;;
  *) echo "guest: LAMA_GUEST_DIST must be bookworm or trixie, not '$dist'" >&2; exit 2 ;;
esac
extra=${LAMA_GUEST_EXTRA:-}
[ "$extra" != schedmd ] ||
  extra=$("$top/contrib/deps.sh" --schedmd-list)
for p in $extra; do
  [[ $p =~ ^[a-z0-9][a-z0-9+.-]+$ ]] || { echo "guest: LAMA_GUEST_EXTRA names Debian packages, not '$p'" >&2; exit 2; }
  packages+=("$p")
done
# A change to how the image is made changes this stamp (and so its folder).
recipe=3
key=$(printf '%s\n' "${packages[@]}" "recipe $recipe" | sha256sum | cut -c1-12)
image=$cache/debian$release-$key

die() { echo "guest: $*" >&2; exit 1; }

# The host's tools: checked on every start, not only when the image is built. Installing
# Debian's qemu-system-x86 removes a newer qemu-utils (a backport some images carry) that its
# qemu-system-common conflicts with, so qemu-utils is asked for again after it.
host_tools() {
  "$top/contrib/deps.sh" mmdebstrap qemu-system-x86 qemu-utils e2fsprogs openssh-client
  "$top/contrib/deps.sh" qemu-utils
  command -v qemu-img >/dev/null || die "qemu-img is missing after installing qemu-utils"
}

build_image() {
  host_tools
  [ -f "$image/.lama-complete" ] && { echo "$image"; return; }
  local started root
  started=$(date +%s)
  rm -rf "$image"
  mkdir -p "$image"
  root=$image/rootfs
  echo "guest: building a Debian $release ($dist) image in $image (about 5 minutes)" >&2
  ssh-keygen -q -t ed25519 -N "" -C lama-guest -f "$image/id_ed25519"
  mmdebstrap --variant=important --include="$(IFS=,; echo "${packages[*]}")" \
    --customize-hook="echo guest > \"\$1/etc/hostname\"" \
    --customize-hook="printf '127.0.0.1 localhost\n127.0.1.1 guest\n' > \"\$1/etc/hosts\"" \
    --customize-hook="printf '/dev/vda / ext4 rw,relatime 0 1\n' > \"\$1/etc/fstab\"" \
    --customize-hook="mkdir -p -m 700 \"\$1/root/.ssh\" && cp '$image/id_ed25519.pub' \"\$1/root/.ssh/authorized_keys\"" \
    --customize-hook="printf '[Match]\nName=en*\n[Network]\nDHCP=yes\n' > \"\$1/etc/systemd/network/20-wired.network\"" \
    --customize-hook="systemctl --root=\"\$1\" enable systemd-networkd" \
    --customize-hook="systemctl --root=\"\$1\" disable slurmctld slurmd" \
    "$dist" "$root" http://deb.debian.org/debian "deb http://deb.debian.org/debian-security $dist-security main" \
    >"$image/build.log" 2>&1 || { tail -n 20 "$image/build.log" >&2; die "mmdebstrap failed (log: $image/build.log)"; }
  cp -L "$root"/vmlinuz "$image/vmlinuz"
  cp -L "$root"/initrd.img "$image/initrd.img"
  mke2fs -q -t ext4 -L lama-guest -d "$root" "$image/rootfs.ext4" 6G
  rm -rf "$root"
  echo "$(( $(date +%s) - started ))" > "$image/.lama-build-seconds"
  touch "$image/.lama-complete"
  echo "guest: image built in $(cat "$image/.lama-build-seconds") s ($(du -sh "$image" | cut -f1) on disk)" >&2
  echo "$image"
}

ssh_to() {
  local run=$1
  shift
  ssh -q -i "$image/id_ed25519" -p "$(cat "$run/port")" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -o BatchMode=yes root@127.0.0.1 "$@"
}

# Starts qemu with ACCEL's CPU; fails if it is gone after a few seconds.
qemu_up() {
  local run=$1 accel=$2 cpu
  shift 2
  if [ "$accel" = kvm ]; then cpu=(-accel kvm -cpu host)
  else cpu=(-accel "tcg,thread=${LAMA_GUEST_TCG_THREAD:-multi}" -cpu max,vendor=GenuineIntel); fi
  rm -f "$run/qemu.pid"
  # Two DRAM nodes with CPUs, and memory without CPUs described by HMAT (memory tiers): nodes 2
  # and 3 fast (four times the DRAM's bandwidth from the same CPUs), node 4 slow and large.
  local hmat=() i t lat bw
  for i in 0:0:100:10 0:2:80:40 0:4:300:5 1:1:100:10 1:3:80:40; do
    IFS=: read -r i t lat bw <<<"$i"
    hmat+=(-numa "hmat-lb,initiator=$i,target=$t,hierarchy=memory,data-type=access-latency,latency=$lat"
      -numa "hmat-lb,initiator=$i,target=$t,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw}G")
  done
  # The host kernel's lines so far: qemu_end reads only those after them.
  { dmesg 2>/dev/null || true; } | wc -l >"$run/dmesg-lines"
  # In the background under a shell that waits for it, not with -daemonize: a daemonized qemu
  # points its stderr at /dev/null once it runs, so one that died later (a crash under TCG, a
  # kill) would leave no word. Here its messages and how it ended are kept in qemu-ACCEL.err.
  QEMU_ERR=$run/qemu-$accel.err setsid bash -c '"$@" 2>"$QEMU_ERR"; s=$?
    echo "guest: qemu ended with status $s$([ "$s" -gt 128 ] && echo ", signal $(kill -l "$s")")" >>"$QEMU_ERR"' qemu \
    qemu-system-x86_64 "${cpu[@]}" -machine pc,hmat=on -smp 8,sockets=2,cores=2,threads=2 -m 4096 \
    -object memory-backend-ram,id=m0,size=1536M -object memory-backend-ram,id=m1,size=1536M \
    -object memory-backend-ram,id=m2,size=256M -object memory-backend-ram,id=m3,size=256M \
    -object memory-backend-ram,id=m4,size=512M \
    -numa node,nodeid=0,cpus=0-3,memdev=m0 -numa node,nodeid=1,cpus=4-7,memdev=m1 \
    -numa node,nodeid=2,memdev=m2,initiator=0 -numa node,nodeid=3,memdev=m3,initiator=1 \
    -numa node,nodeid=4,memdev=m4,initiator=0 "${hmat[@]}" \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1${cmdline[*]/#/ }" \
    -drive "file=$run/overlay.qcow2,if=virtio,format=qcow2" \
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=n0 \
    "$@" -display none -serial "file:$run/console-$accel.log" \
    -pidfile "$run/qemu.pid" </dev/null >/dev/null 2>&1 &
  local waiter=$! i
  # qemu writes its pid file once its options are read; a loaded machine may take a while.
  for i in $(seq 30); do
    [ ! -s "$run/qemu.pid" ] && kill -0 "$waiter" 2>/dev/null || break
    sleep 1
  done
  sleep 5
  qemu_alive "$run"
}

# Whether RUN's qemu runs.
qemu_alive() {
  [ -s "$1/qemu.pid" ] && kill -0 "$(cat "$1/qemu.pid")" 2>/dev/null
}

# Ends RUN's qemu and waits until it is gone: the next one takes its ssh port.
qemu_kill() {
  local pid i
  pid=$(cat "$1/qemu.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  kill -KILL "$pid" 2>/dev/null || true
  sleep 1
}

# Why RUN's qemu ended, as far as the machine tells: its own last words and status, and the
# host kernel's lines about qemu or memory since it started (where this user may read them;
# a segfault line names the address in qemu's code).
qemu_end() {
  local run=$1 accel=$2
  tail -n 5 "$run/qemu-$accel.err" 2>/dev/null
  { dmesg 2>/dev/null || true; } | tail -n +$(($(cat "$run/dmesg-lines" 2>/dev/null || echo 0) + 1)) |
    grep -iE 'qemu|out of memory|oom-kill' | tail -n 5 || true
}

start() {
  local run=$1 shares=() i=0 spec tag dir accel mounts="" started limit oopsed=0 ended=0
  shift
  build_image >/dev/null
  [ ! -e "$run/qemu.pid" ] || die "$run holds a guest already (contrib/guest.sh stop $run)"
  mkdir -p "$run"
  # The first port from LAMA_GUEST_PORT up that nothing listens on.
  while ss -Hltn "sport = :$port" | grep -q .; do port=$((port + 1)); done
  echo "$port" > "$run/port"
  for spec in "$@"; do
    tag=s$i dir=${spec#*=}
    [ -d "$dir" ] || die "no folder $dir to share"
    shares+=(-virtfs "local,path=$dir,mount_tag=$tag,security_model=none,readonly=on")
    mounts+="mkdir -p '$dir' && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro $tag '$dir' && "
    i=$((i + 1))
  done
  qemu-img create -q -f qcow2 -F raw -b "$image/rootfs.ext4" "$run/overlay.qcow2"
  # KVM when asked for, or by default when /dev/kvm is there and qemu stays up with it.
  accel=${LAMA_GUEST_ACCEL:-auto}
  if [ "$accel" != tcg ] && { [ "$accel" = kvm ] || [ -w /dev/kvm ]; } && qemu_up "$run" kvm "${shares[@]}"; then
    accel=kvm
  else
    accel=tcg
    qemu_up "$run" tcg "${shares[@]}" || boot_again
  fi
  echo "$accel" > "$run/accel"
  started=$(date +%s) limit=$([ "$accel" = kvm ] && echo 120 || echo 600)
  until ssh_to "$run" true 2>/dev/null; do
    if [ "$accel" = kvm ] && { [ $(( $(date +%s) - started )) -ge "$limit" ] || ! qemu_alive "$run"; }; then
      # A KVM that starts but never boots, or whose qemu ends on the way: fall back to TCG once.
      accel=tcg limit=600
      echo tcg > "$run/accel"
      boot_afresh kvm
    fi
    # QEMU before 8.1 (Debian 12 has 7.2) can run a stale translation of code the kernel has just
    # patched under multi-threaded TCG: an int3 Oops at boot, now and then (ClangBuiltLinux
    # boot-utils #111, fixed upstream by QEMU's cb62bd15 and deba7870). The guest is restarted,
    # at most twice, and each restart is said.
    if [ "$accel" = tcg ] && [ "$oopsed" -lt 2 ] && grep -qE 'Oops: |Kernel panic' "$run/console-tcg.log" 2>/dev/null; then
      oopsed=$((oopsed + 1))
      echo "guest: the kernel oopsed while booting under TCG (QEMU 7.2's translation-block defect, boot-utils #111); restart $oopsed of at most 2" >&2
      boot_afresh "oops$oopsed"
      continue
    fi
    [ $(( $(date +%s) - started )) -lt "$limit" ] || die "no ssh from the guest after $limit s (console: $run/console-$accel.log)"
    qemu_alive "$run" || boot_again
    sleep 5
  done
  [ -z "$mounts" ] || ssh_to "$run" "${mounts}true"
  echo "guest: up with $accel in $(( $(date +%s) - started )) s" >&2
}

# RUN's qemu ended on its own while the guest booted. QEMU 7.2 (Debian 12's) under
# multi-threaded TCG was seen to die with SIGSEGV while the kernel probed its PCI devices, the
# same moment in CI and here (1 boot in 3 beside a sandbox suite): said with qemu's last words,
# and booted afresh, at most twice; a third end is the failure. (Uses start's run, accel and
# ended.)
boot_again() {
  [ "$ended" -lt 2 ] || die "qemu ended a third time while the guest booted (console: $run/console-$accel.log): $(qemu_end "$run" "$accel")"
  ended=$((ended + 1))
  echo "guest: qemu ended while the guest booted under $accel ($(qemu_end "$run" "$accel" | paste -sd' ' -)); boot $((ended + 1)) of at most 3" >&2
  boot_afresh "ended$ended"
}

# Boots the guest anew under start's accel: the qemu before it killed (when it still runs), its
# console and messages kept as console-ACCEL.WHY.log and qemu-ACCEL.WHY.err, a fresh overlay.
# (Uses start's run, accel, shares and started.)
boot_afresh() {
  qemu_kill "$run"
  mv "$run/console-$accel.log" "$run/console-$accel.$1.log" 2>/dev/null || true
  mv "$run/qemu-$accel.err" "$run/qemu-$accel.$1.err" 2>/dev/null || true
  qemu-img create -q -f qcow2 -F raw -b "$image/rootfs.ext4" "$run/overlay.qcow2"
  started=$(date +%s)
  qemu_up "$run" "$accel" "${shares[@]}" || boot_again
}

stop() {
  local run=$1 pid
  [ -f "$run/qemu.pid" ] || return 0
  pid=$(cat "$run/qemu.pid")
  ssh_to "$run" 'systemctl poweroff' 2>/dev/null || true
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill "$pid" 2>/dev/null || true
  rm -f "$run/qemu.pid" "$run/overlay.qcow2"
}

case ${1:-} in
  image) build_image ;;
  start) [ $# -ge 2 ] || die "usage: contrib/guest.sh start RUN [TAG=DIR...]"; shift; start "$@" ;;
  ssh) [ $# -ge 3 ] || die "usage: contrib/guest.sh ssh RUN CMD..."; shift; run=$1; shift; ssh_to "$run" "$@" ;;
  stop) [ $# -eq 2 ] || die "usage: contrib/guest.sh stop RUN"; stop "$2" ;;
  *) die "usage: contrib/guest.sh image|start|ssh|stop (see the top of this script)" ;;
esac
