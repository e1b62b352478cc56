// L2CAPConnecting: opening a channel to a peer's PSM (CoreBluetooth's openL2CAPChannel),
// with a deadline and cancellation, the kernel's connect running off the cooperative pool.
import Bluetooth
import Dispatch
import Synchronization

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
  /// - Throws: ``L2CAPError/Code-swift.struct/refused`` when nothing listens on `psm` there,
  ///   ``L2CAPError/Code-swift.struct/timedOut`` after `timeout`,
  ///   ``L2CAPError/Code-swift.struct/insufficientSecurity`` when the peer wants more security
  ///   than could be had; a cancelled task stops connecting and throws `closed`.
  public static func open(
    to peer: BluetoothAddress, peerType: AddressType = .public, psm: L2CAPPSM,
    from local: BluetoothAddress? = nil, localType: AddressType = .public,
    requireEncryption: Bool = false, timeout: Duration = .seconds(30)
  ) async throws(L2CAPError) -> L2CAPChannel {
    let fd = try L2CAPSocket.open()
    // The kernel's connect honours SO_SNDTIMEO (its default is 40 s): set ours. The channel
    // then sets the one its sends use (L2CAPChannelCore.sendWakeInterval).
    let pending = PendingConnect(fd: fd)
    let target = L2CAPSocketAddress(
      address: peer, kind: L2CAPSocketAddress.Kind(peerType), psm: psm.rawValue)
    let result: Result<Void, L2CAPError> = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        DispatchQueue(label: "blekit.l2cap.connect").async {
          continuation.resume(
            returning: Result { () throws(L2CAPError) in
              try L2CAPSocket.bind(
                fd,
                L2CAPSocketAddress(
                  address: local ?? L2CAPSocketAddress.anyAddress,
                  kind: L2CAPSocketAddress.Kind(localType), psm: 0))
              L2CAPSocket.requestReceiveMTU(fd, L2CAPSocket.preferredReceiveMTU)
              if requireEncryption {
                try L2CAPSocket.setSecurity(fd, level: L2CAPSocket.securityMedium)
              }
              L2CAPSocket.setSendTimeout(fd, timeout)
              do throws(L2CAPError) {
                try L2CAPSocket.connect(fd, target)
              } catch {
                // EINPROGRESS: SO_SNDTIMEO ran out while the kernel was still connecting.
                if error.errno == EINPROGRESS || error.errno == EAGAIN {
                  throw L2CAPError(
                    .timedOut, "no L2CAP channel to \(peer) PSM \(psm) within \(timeout)",
                    errno: error.errno)
                }
                throw error
              }
            })
        }
      }
    } onCancel: {
      pending.cancel()
    }
    let cancelled = pending.finish()
    switch result {
    case .success where !cancelled:
      return try L2CAPChannel(fd: fd, peer: target, psm: psm)
    case .success:
      Syscall.close(fd)
      throw L2CAPError(.closed, "opening the L2CAP channel was cancelled")
    case .failure(let error):
      Syscall.close(fd)
      if cancelled { throw L2CAPError(.closed, "opening the L2CAP channel was cancelled") }
      throw describe(error, peer: peer, psm: psm)
    }
  }

  /// Names the peer and PSM in the kernel's terse errors.
  private static func describe(_ error: L2CAPError, peer: BluetoothAddress, psm: L2CAPPSM)
    -> L2CAPError
  {
    var error = error
    switch error.code {
    case .refused:
      error.message = "\(peer) refused an L2CAP channel on PSM \(psm) (nothing listens there)"
    case .insufficientSecurity:
      error.message = "\(peer) requires more security on PSM \(psm) than the link has"
    case .timedOut:
      if !error.message.hasPrefix("no L2CAP") {
        error.message = "no L2CAP channel to \(peer) PSM \(psm): \(error.message)"
      }
    case .unavailable:
      error.message = "cannot reach \(peer): \(error.message)"
    default:
      error.message = "opening an L2CAP channel to \(peer) PSM \(psm): \(error.message)"
    }
    return error
  }
}

/// A connect in progress: cancelling shuts the socket down (which ends the kernel's wait);
/// `finish` ends the window in which that may happen.
private final class PendingConnect: Sendable {
  private struct State {
    var open = true
    var cancelled = false
  }
  private let fd: Int32
  private let state = Mutex(State())

  init(fd: Int32) { self.fd = fd }

  func cancel() {
    state.withLock { state in
      guard state.open else { return }
      state.cancelled = true
      Syscall.shutdown(fd, Int32(SHUT_RDWR))
    }
  }

  /// Whether it was cancelled.
  func finish() -> Bool {
    state.withLock { state in
      state.open = false
      return state.cancelled
    }
  }
}
