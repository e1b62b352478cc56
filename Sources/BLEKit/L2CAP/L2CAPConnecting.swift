// L2CAPConnecting: opening a channel to a peer's PSM (CoreBluetooth's openL2CAPChannel),
// with a deadline and cancellation: a non-blocking connect that waits on the Reactor.
import Bluetooth

#if canImport(Glibc)
  import Glibc
#endif

extension L2CAPChannel {
  /// Opens a channel to `psm` on the LE device `peer` (`peerType`: its address type), from the
  /// adapter whose address is `local` (nil: the kernel's choice). The kernel makes the LE link
  /// when there is none (the peer must then be advertising connectably). With
  /// `requireEncryption` the kernel encrypts the link before opening the channel, pairing
  /// first when there are no keys (bluetoothd's agent is asked, as for any pairing).
  ///
  /// - Throws: ``BluetoothError/Code/channelRefused`` when nothing listens on `psm` there,
  ///   ``BluetoothError/Code/timeout`` after `timeout`,
  ///   ``BluetoothError/Code/insufficientSecurity`` when the peer wants more security
  ///   than could be had; a cancelled task stops connecting and throws `closed`.
  public static func open(
    to peer: BluetoothAddress, peerType: AddressType = .public, psm: L2CAPPSM,
    from local: BluetoothAddress? = nil, localType: AddressType = .public,
    requireEncryption: Bool = false, timeout: Duration = .seconds(30)
  ) async throws(BluetoothError) -> L2CAPChannel {
    let deadline = ContinuousClock.now + timeout
    let fd = try L2CAPSocket.open()
    let target = L2CAPSocketAddress(
      address: peer, kind: L2CAPSocketAddress.Kind(peerType), psm: psm.rawValue)
    do throws(BluetoothError) {
      try L2CAPSocket.bind(
        fd,
        L2CAPSocketAddress(
          address: local ?? L2CAPSocketAddress.anyAddress,
          kind: L2CAPSocketAddress.Kind(localType), psm: 0))
      L2CAPSocket.requestReceiveMTU(fd, L2CAPSocket.preferredReceiveMTU)
      if requireEncryption {
        try L2CAPSocket.setSecurity(fd, level: L2CAPSocket.securityMedium)
      }
      // The kernel's own connect timer (SO_SNDTIMEO, 40 s by default) must not end a longer
      // `timeout` first. The channel then sets the one its close uses
      // (L2CAPChannelCore.disconnectTimeout).
      L2CAPSocket.setSendTimeout(fd, timeout)
      L2CAPSocket.setNonBlocking(fd)
      try await connect(fd, target, until: deadline)
    } catch {
      Reactor.shared.release(fd)
      Syscall.close(fd)
      if error.code == .timeout, error.errno == nil {
        throw BluetoothError(.timeout, "no L2CAP channel to \(peer) PSM \(psm) within \(timeout)")
      }
      if error.code == .channelClosed, error.errno == nil { throw error }
      throw describe(error, peer: peer, psm: psm)
    }
    Reactor.shared.release(fd)
    return try L2CAPChannel(fd: fd, peer: target, psm: psm)
  }

  /// A non-blocking connect: `EINPROGRESS`, then the socket becomes writable when the kernel
  /// has opened the channel or failed to (`SO_ERROR` tells which). Throws `timeout` (no
  /// errno) at `deadline` and `channelClosed` (no errno) when the task is cancelled.
  private static func connect(
    _ fd: Int32, _ target: L2CAPSocketAddress, until deadline: ContinuousClock.Instant
  ) async throws(BluetoothError) {
    do throws(BluetoothError) {
      try L2CAPSocket.connect(fd, target)
      return
    } catch {
      guard error.errno == EINPROGRESS || error.errno == EAGAIN else { throw error }
    }
    while true {
      let wake: ReactorWait.Wake
      do {
        wake = try await Reactor.shared.wait(fd, for: .writable, until: deadline)
      } catch {
        throw BluetoothError(.channelClosed, "opening the L2CAP channel was cancelled")
      }
      switch wake {
      case .timedOut:
        throw BluetoothError(.timeout, "timed out")
      case .released, .cancelled:
        throw BluetoothError(.channelClosed, "opening the L2CAP channel was cancelled")
      case .ready:
        let number = L2CAPSocket.pendingError(fd)
        if number == 0 { return }
        if number == EINPROGRESS || number == EAGAIN { continue }
        throw .fromErrno(number, "connect")
      }
    }
  }

  /// Names the peer and PSM in the kernel's terse errors.
  private static func describe(_ error: BluetoothError, peer: BluetoothAddress, psm: L2CAPPSM)
    -> BluetoothError
  {
    var error = error
    switch error.code {
    case .channelRefused:
      error.message = "\(peer) refused an L2CAP channel on PSM \(psm) (nothing listens there)"
    case .insufficientSecurity:
      error.message = "\(peer) requires more security on PSM \(psm) than the link has"
    case .timeout:
      // The kernel's own timer (an errno): the deadline's is named where it is thrown.
      error.message = "no L2CAP channel to \(peer) PSM \(psm): \(error.message)"
    case .l2capUnavailable:
      error.message = "cannot reach \(peer): \(error.message)"
    default:
      error.message = "opening an L2CAP channel to \(peer) PSM \(psm): \(error.message)"
    }
    return error
  }
}
