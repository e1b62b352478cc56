# shellcheck shell=bash
# Host side: the qemu command line of one lab VM. Sourced by scripts/lab.
#
# Devices of every VM:
#   ttyS0              kernel and init console -> HOSTDIR/console.log
#   virtio port lab.out  the command's output and the init's markers -> a fifo
#                      read by scripts/lab (a file chardev: always connected)
#   9p hostroot        the guest's root (read-only; an overlay makes it writable): the
#                      host's / for Debian 12, the trixie root for Debian 13
#   9p hostfs          Debian 13 only: the host's / (read-only), from which the initramfs
#                      lends the paths in lab.binds= at the same places
#   9p results         HOSTDIR, writable, mounted at the same path inside
#   9p shared          RUN_DIR/shared, writable, the same for both hosts
# --forward G:H adds a virtio network card on qemu's user network, restricted (no route
# out), whose forwards take the guest's connections to 10.0.2.100:G to the host's
# 127.0.0.1:H (a socat per connection).
# Two-host mode adds the radio bridge, a unix socket joining the two VMs:
#   host a: virtio port lab.bridge (socat joins it to btvirt's server socket)
#   host b: virtio console hvc0 (btattach turns it into hci0)

# qemu_command HOST HOSTDIR ROLE: set QEMU_CMD.
qemu_command() {
  local host=$1 hostdir=$2 role=$3
  local append="console=ttyS0 panic=-1 quiet loglevel=4 mitigations=off"
  append+=" lab.init=$LAB_D/guest-init lab.results=$hostdir lab.shared=$RUN_DIR/shared"
  append+=" lab.host=$host"
  [[ -z $GUEST_BINDS ]] || append+=" lab.binds=$GUEST_BINDS"
  # Debugging knobs (environment): extra kernel parameters, another -cpu.
  append+=${LAB_KERNEL_APPEND:+ $LAB_KERNEL_APPEND}
  QEMU_CMD=(
    "$(find_tool qemu-system-x86_64)"
    -nodefaults -no-user-config -display none -no-reboot
    -name "blekit-lab-$host"
    -m "$MEMORY" -smp "$SMP"
  )
  if [[ $ACCEL == kvm ]]; then
    QEMU_CMD+=(-accel kvm -cpu host)
  else
    QEMU_CMD+=(-accel tcg -cpu "${LAB_QEMU_CPU:-max}")
  fi
  QEMU_CMD+=(
    -kernel "$BOOT_KERNEL" -initrd "$INITRAMFS" -append "$append"
    -chardev "file,id=console,path=$hostdir/console.log"
    -serial chardev:console
    -virtfs "local,path=${GUEST_ROOT:-/},mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$hostdir,mount_tag=results,security_model=none,multidevs=remap"
    -virtfs "local,path=$RUN_DIR/shared,mount_tag=shared,security_model=none,multidevs=remap"
  )
  [[ -z $GUEST_BINDS ]] ||
    QEMU_CMD+=(-virtfs "local,path=/,mount_tag=hostfs,security_model=none,readonly=on,multidevs=remap")
  QEMU_CMD+=(
    -device virtio-serial-pci,id=vser
    -chardev "file,id=out,path=$RUN_TMP/out-$host"
    -device virtserialport,bus=vser.0,chardev=out,name=lab.out
  )
  if ((${#FORWARDS[@]})); then
    local netdev=user,id=lab,restrict=on forward
    for forward in "${FORWARDS[@]}"; do
      netdev+=",guestfwd=tcp:$FORWARD_ADDRESS:${forward%%:*}-cmd:socat - TCP:127.0.0.1:${forward#*:}"
    done
    QEMU_CMD+=(-netdev "$netdev" -device virtio-net-pci,netdev=lab)
  fi
  case $role in
    bridge-server)
      QEMU_CMD+=(
        -chardev "socket,id=bridge,path=$BRIDGE_SOCKET,server=on,wait=off"
        -device virtserialport,bus=vser.0,chardev=bridge,name=lab.bridge
      )
      ;;
    bridge-client)
      QEMU_CMD+=(
        -chardev "socket,id=bridge,path=$BRIDGE_SOCKET"
        -device virtconsole,bus=vser.0,chardev=bridge,name=lab.bridge
      )
      ;;
  esac
}
