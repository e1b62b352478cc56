# shellcheck shell=bash
# Host side: find the kernel in /boot, extract it for a fast boot, and build
# the lab's initramfs from its modules and busybox-static. Sourced by
# scripts/lab.
#
# GUEST_ROOT is the root filesystem the guest boots: "" for Debian 12 (the
# host's own root), a trixie root for Debian 13 (scripts/lab.d/guest-root).
# The kernel and its modules come from that root's /boot and /lib/modules.
#
# Booting the compressed bzImage under TCG spends ~4 s decompressing it. The
# uncompressed ELF inside boots directly (PVH entry, CONFIG_PVH) in well
# under a second, so it is extracted once and cached beside the initramfs.
#
# The initramfs holds only what is needed to reach the real root (virtio, 9p,
# overlay) plus the modules every lab boot loads anyway (Bluetooth, vhci, the
# AF_ALG crypto btvirt uses), loaded with busybox insmod. It is cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/blekit-lab/, keyed by the kernel, the
# module files, busybox and the init script, so it is rebuilt when any of
# them changes.

# Modules insmod'ed by the initramfs, in an order that respects dependencies
# (dependencies are added automatically from modules.dep).
# The DRBG (stdrng) comes before ECDH: ECDH's self-test generates a key
# with it, and without it the test fails and the kernel's SMP reports
# "Unable to create ECDH crypto context" (no LE Secure Connections).
LAB_INITRAMFS_MODULES=(
  virtio_pci 9pnet_virtio 9p overlay virtio_console
  sha512_generic sha3_generic ctr jitterentropy_rng drbg
  af_alg algif_hash algif_skcipher cmac ecb ecdh_generic hci_vhci
)
# Copied but not loaded in order: the init uses tcrypt with parameters.
LAB_INITRAMFS_EXTRA_MODULES=(tcrypt)

# kernel_image: print the kernel to boot (--kernel, or the guest root's newest
# /boot/vmlinuz-VERSION whose /lib/modules/VERSION/modules.dep exists).
kernel_image() {
  if [[ -n ${KERNEL-} ]]; then
    [[ -f $KERNEL ]] || return 1
    printf '%s\n' "$KERNEL"
    return 0
  fi
  local image version best=""
  while IFS= read -r image; do
    version=${image#"${GUEST_ROOT-}"/boot/vmlinuz-}
    [[ -f ${GUEST_ROOT-}/lib/modules/$version/modules.dep ]] && best=$image
  done < <(printf '%s\n' "${GUEST_ROOT-}"/boot/vmlinuz-* | sort -V)
  [[ -n $best ]] || return 1
  printf '%s\n' "$best"
}

# kernel_version IMAGE: the module directory name for a kernel image.
kernel_version() {
  local image=$1 version
  version=${image##*/vmlinuz-}
  if [[ $version == "$image" || ! -d ${GUEST_ROOT-}/lib/modules/$version ]]; then
    # A kernel given with --kernel under another name: read its version
    # string ("Linux version X ...") from the image header.
    version=$(grep -aoE '[0-9]+\.[0-9]+\.[0-9]+[^ ]* \([^)]*@' "$image" | head -n1 | cut -d' ' -f1)
  fi
  [[ -n $version && -f ${GUEST_ROOT-}/lib/modules/$version/modules.dep ]] || return 1
  printf '%s\n' "$version"
}

# module_load_order VERSION NAME...: print module paths (relative to
# /lib/modules/VERSION) in load order, dependencies first, each once.
# Built-in modules are skipped.
module_load_order() {
  local version=$1
  shift
  awk -v wanted="$*" '
    BEGIN { n = split(wanted, w, " ") }
    FILENAME ~ /modules\.builtin$/ {
      name = $1; sub(/.*\//, "", name); sub(/\.ko$/, "", name); gsub(/-/, "_", name)
      builtin[name] = 1
      next
    }
    {
      path = $1; sub(/:$/, "", path)
      name = path; sub(/.*\//, "", name); sub(/\.ko(\.[a-z]+)?$/, "", name)
      gsub(/-/, "_", name)
      deps[path] = ""
      for (i = NF; i >= 2; i--) deps[path] = deps[path] " " $i
      byname[name] = path
    }
    function visit(p,   d, k, i) {
      if (p in seen) return
      seen[p] = 1
      k = split(deps[p], d, " ")
      for (i = 1; i <= k; i++) visit(d[i])
      print p
    }
    END {
      for (i = 1; i <= n; i++) {
        m = w[i]; gsub(/-/, "_", m)
        if (m in byname) visit(byname[m])
        else if (!(m in builtin)) missing = missing " " m
      }
      if (missing != "") print "missing:" missing > "/dev/stderr"
    }
  ' "${GUEST_ROOT-}/lib/modules/$version/modules.builtin" "${GUEST_ROOT-}/lib/modules/$version/modules.dep"
}

# initramfs_key VERSION IMAGE: a hash of everything the initramfs is built
# from (uses LOAD_MODULES and EXTRA_MODULES).
initramfs_key() {
  local version=$1 image=$2 busybox
  busybox=$(find_tool busybox)
  {
    printf 'format 2\n%s\n' "$version"
    stat -L -c '%n %s %Y' "$image" "$busybox" "${GUEST_ROOT-}/lib/modules/$version/modules.dep"
    (cd "${GUEST_ROOT-}/lib/modules/$version" && stat -L -c '%n %s %Y' "${LOAD_MODULES[@]}" "${EXTRA_MODULES[@]}")
    cat "$LAB_D/initramfs-init"
  } | sha256sum | cut -c1-16
}

# prepare_boot: set KERNEL_IMAGE, KERNEL_VERSION and INITRAMFS, building the
# initramfs if the cached one is missing or stale.
prepare_boot() {
  KERNEL_IMAGE=$(kernel_image) ||
    die "no kernel found${KERNEL:+ at $KERNEL}: install the Debian package linux-image-amd64"
  KERNEL_VERSION=$(kernel_version "$KERNEL_IMAGE") ||
    die "no modules for $KERNEL_IMAGE in /lib/modules: install the Debian package linux-image-amd64"
  [[ -r $KERNEL_IMAGE ]] ||
    die "cannot read $KERNEL_IMAGE (Debian makes it readable by root only): run as root or chmod a+r it"
  mapfile -t LOAD_MODULES < <(module_load_order "$KERNEL_VERSION" "${LAB_INITRAMFS_MODULES[@]}")
  mapfile -t EXTRA_MODULES < <(module_load_order "$KERNEL_VERSION" "${LAB_INITRAMFS_EXTRA_MODULES[@]}")
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/blekit-lab key
  key=$(initramfs_key "$KERNEL_VERSION" "$KERNEL_IMAGE")
  INITRAMFS="$cache/initramfs-$KERNEL_VERSION-$key.cpio"
  mkdir -p "$cache"
  [[ -s $INITRAMFS ]] || build_initramfs "$KERNEL_VERSION" "$INITRAMFS"
  BOOT_KERNEL=$(extracted_kernel "$KERNEL_IMAGE" "$cache") || BOOT_KERNEL=$KERNEL_IMAGE
}

# extracted_kernel IMAGE CACHE: print the path of IMAGE's uncompressed ELF
# kernel (extracting it into CACHE if needed), or fail if it has none with
# a PVH entry.
extracted_kernel() {
  local image=$1 cache=$2 key out
  key=$(stat -L -c '%n %s %Y' "$image" | sha256sum | cut -c1-16)
  out="$cache/vmlinux-${image##*/vmlinuz-}-$key"
  [[ -s $out ]] && { printf '%s\n' "$out"; return 0; }
  local magic tool offset
  for magic in $'\xfd7zXZ:xz' $'\x1f\x8b\x08:gzip' $'\x28\xb5\x2f\xfd:zstd'; do
    tool=${magic##*:}
    command -v "$tool" >/dev/null || continue
    while IFS=: read -r offset _; do
      # The decompressor complains about the bytes after the stream: ignore.
      tail -c +$((offset + 1)) "$image" | "$tool" -dc >"$out.tmp.$$" 2>/dev/null || true
      if is_pvh_elf "$out.tmp.$$"; then
        mv "$out.tmp.$$" "$out"
        for image in "$cache/vmlinux-${1##*/vmlinuz-}"-*; do
          [[ $image == "$out" ]] || rm -f "$image"
        done
        printf '%s\n' "$out"
        return 0
      fi
    done < <(LC_ALL=C grep -obUa "${magic%:*}" "$image" | head -n 3)
  done
  rm -f "$out.tmp.$$"
  return 1
}

# is_pvh_elf FILE: an ELF file holding the Xen PVH entry note (qemu boots
# such a kernel directly).
is_pvh_elf() {
  [[ $(head -c 4 "$1" 2>/dev/null) == $'\x7fELF' ]] || return 1
  LC_ALL=C grep -qaF 'Xen' "$1"
}

# build_initramfs VERSION OUTPUT: LOAD_MODULES are loaded at boot in this
# order; EXTRA_MODULES are only copied.
build_initramfs() {
  local version=$1 output=$2 stage busybox applet path
  say "building initramfs for kernel $version"
  stage=$(mktemp -d "${TMPDIR:-/tmp}/blekit-initramfs.XXXXXX")
  busybox=$(find_tool busybox)
  mkdir -p "$stage"/{bin,dev,proc,sys,lower,rw,newroot,modules}
  cp "$busybox" "$stage/bin/busybox"
  for applet in sh mount umount mkdir insmod switch_root cat echo sleep rm ln; do
    ln -s busybox "$stage/bin/$applet"
  done
  : >"$stage/modules/load-order"
  for path in "${LOAD_MODULES[@]}"; do
    copy_module "${GUEST_ROOT-}/lib/modules/$version/$path" "$stage/modules"
    printf '%s\n' "$(module_file_name "$path")" >>"$stage/modules/load-order"
  done
  for path in "${EXTRA_MODULES[@]}"; do
    copy_module "${GUEST_ROOT-}/lib/modules/$version/$path" "$stage/modules"
  done
  install -m 0755 "$LAB_D/initramfs-init" "$stage/init"
  (cd "$stage" && find . | busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$output.tmp.$$"
  mv "$output.tmp.$$" "$output"
  rm -rf "$stage"
  # Drop images built for other inputs of this kernel (the other generation's kernel keeps its
  # own).
  for path in "${output%/*}"/initramfs-"$version"-*.cpio; do
    [[ $path == "$output" ]] || rm -f "$path"
  done
}

# module_file_name PATH: the name of a module file once copied (compression suffix dropped).
module_file_name() {
  local name=${1##*/}
  printf '%s\n' "${name%.ko.*}.ko"
}

# copy_module FILE DIR: copy a module into DIR uncompressed: busybox's insmod loads plain .ko
# files only, and Debian 13's kernel ships its modules xz-compressed (.ko.xz).
copy_module() {
  local file=$1 dir=$2 out
  out="$dir/$(module_file_name "$file")"
  case $file in
    *.ko.xz) xz -dc "$file" >"$out" ;;
    *.ko.zst) zstd -qdc "$file" >"$out" ;;
    *.ko.gz) gzip -dc "$file" >"$out" ;;
    *) cp "$file" "$out" ;;
  esac
}
