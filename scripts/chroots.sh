# The Debian chroots of scripts/check-platforms and scripts/build-wheels
# (sourced, not run): CPython 3.14 and 3.15 from Debian sid on x86_64, and
# CPython 3.11 from Debian bookworm on aarch64, run by qemu-user-static.
#
# Each chroot is made once with debootstrap (a minute or two from a warm
# mirror, 20 minutes or more from a cold one; arm64 under emulation: longer)
# and cached in $ZJC_PLATFORMS_DIR (default .platforms/ in the checkout, which
# git ignores). Root only: debootstrap, chroot and mounts.

chroot_cache=${ZJC_PLATFORMS_DIR:-$PWD/.platforms}
chroot_mirror=${ZJC_DEBIAN_MIRROR:-http://deb.debian.org/debian}

chroot_say() { printf '\n== %s\n' "$*"; }

# apt, one script at a time (CI runs the fuzzers beside the suite): a lock of our own, and dpkg's waited for.
chroot_apt_get() { flock /var/lock/zodb-json-codec-apt.lock apt-get -o DPkg::Lock::Timeout=900 "$@"; }
host_packages() {  # host_packages COMMAND PACKAGE ...: installed unless COMMAND is there
  local command=$1
  shift
  command -v "$command" >/dev/null && return
  chroot_say "installing $*"
  DEBIAN_FRONTEND=noninteractive chroot_apt_get update -q
  DEBIAN_FRONTEND=noninteractive chroot_apt_get install -y -q --no-install-recommends "$@"
}

# What each chroot is: debootstrap's suite and architecture, and its packages.
# util-linux: runuser, which tests/pgserver.py runs PostgreSQL with as root
# (not in minbase).
chroot_common=gcc,libc6-dev,postgresql,ca-certificates,util-linux
declare -A chroot_suite=([sid-amd64]=sid [bookworm-arm64]=bookworm)
declare -A chroot_arch=([sid-amd64]=amd64 [bookworm-arm64]=arm64)
declare -A chroot_packages=(
  [sid-amd64]=python3.14-dev,python3.14-venv,python3.15-dev,python3.15-venv,$chroot_common
  [bookworm-arm64]=python3-dev,python3-venv,$chroot_common
)

emulate_arm64() {  # qemu-user-static registered for aarch64 binaries
  host_packages qemu-aarch64-static qemu-user-static
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] || cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
}

make_chroot() {  # make_chroot NAME: made once, then completed (in enter_chroot) when its package list grows
  local name=$1 root=$chroot_cache/$1 started=$SECONDS
  [[ $(id -u) -eq 0 ]] || { echo "chroots: needs root (debootstrap, chroot, mounts)" >&2; return 1; }
  host_packages debootstrap debootstrap
  [[ ${chroot_arch[$name]} == amd64 ]] || emulate_arm64
  [[ -e $root/.zjc-ready ]] && return
  chroot_say "making the Debian ${chroot_suite[$name]} ${chroot_arch[$name]} chroot in $root (once)"
  rm -rf "$root"
  mkdir -p "$chroot_cache"
  debootstrap --arch="${chroot_arch[$name]}" --variant=minbase --include="${chroot_packages[$name]}" \
      "${chroot_suite[$name]}" "$root" "$chroot_mirror" >"$chroot_cache/debootstrap-$name.log" 2>&1 || {
    tail -n 20 "$chroot_cache/debootstrap-$name.log" >&2
    echo "chroots: debootstrap failed (log: $chroot_cache/debootstrap-$name.log)" >&2
    return 1
  }
  echo "${chroot_packages[$name]}" >"$root/.zjc-ready"
  echo "made in $((SECONDS - started)) s"
}

chroot_mounts=()
unmount_chroots() {  # what enter_chroot mounted, in reverse order (the caller's EXIT trap)
  local i
  for ((i = ${#chroot_mounts[@]} - 1; i >= 0; i--)); do umount -l "${chroot_mounts[i]}" 2>/dev/null || true; done
  chroot_mounts=()
}

enter_chroot() {  # enter_chroot NAME: mounted, the network and pip set up as here
  local name=$1 root=$chroot_cache/$1
  mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc"; chroot_mounts+=("$root/proc"); }
  mountpoint -q "$root/dev" || { mount --bind /dev "$root/dev"; chroot_mounts+=("$root/dev"); }
  # A devpts of its own: a terminal test opens a pty.
  mountpoint -q "$root/dev/pts" || {
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
    chroot_mounts+=("$root/dev/pts")
  }
  cp -L /etc/resolv.conf /etc/hosts "$root/etc/"
  [[ -e /etc/pip.conf ]] && cp -L /etc/pip.conf "$root/etc/pip.conf"
  if [[ -e /etc/ssl/certs/ca-certificates.crt ]]; then
    mkdir -p "$root/etc/ssl/certs"
    cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  fi
  # Made with another list: add what it lacks. (Valid-Until not checked: the
  # mirror may serve a snapshot older than its Release file allows.)
  if [[ $(cat "$root/.zjc-ready") != "${chroot_packages[$name]}" ]]; then
    chroot_say "installing into $name: ${chroot_packages[$name]//,/ }"
    in_chroot "$name" DEBIAN_FRONTEND=noninteractive sh -c "apt-get -o Acquire::Check-Valid-Until=false update -q &&
      apt-get install -y -q --no-install-recommends ${chroot_packages[$name]//,/ }"
    echo "${chroot_packages[$name]}" >"$root/.zjc-ready"
  fi
}

in_chroot() {  # in_chroot NAME [VAR=VALUE ...] COMMAND ...: run with a clean environment
  local name=$1
  shift
  chroot "$chroot_cache/$name" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

copy_tree_into() {  # copy_tree_into NAME DIR: the working tree (what git does not ignore) at DIR in the chroot
  local target=$chroot_cache/$1$2
  rm -rf "$target"
  mkdir -p "$target"
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$target"
}
