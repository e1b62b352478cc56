// L2CAPListener: a published L2CAP LE channel (CoreBluetooth's publishL2CAPChannel): a PSM
// that accepts channels, yielded with their peer's address.
import Bluetooth
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A PSM published on an adapter; every central that opens a channel to it shows up in
/// ``channels``. Open one with ``PeripheralManager/publishL2CAPChannel(psm:requireEncryption:)``
/// or ``listen(on:addressType:psm:requireEncryption:)``.
///
/// With `requireEncryption` the kernel accepts a channel only on an encrypted link: a central
/// whose link is not encrypted is answered "insufficient encryption", and Linux centrals then
/// encrypt (pairing first if they have no keys) and ask again by themselves.
///
/// ``close()`` unpublishes the PSM (channels already open stay open); so does dropping it.
public final class L2CAPListener: Sendable, CustomStringConvertible {
  /// The PSM centrals open channels to (the kernel's pick when none was asked for).
  public let psm: L2CAPPSM
  /// Whether channels need an encrypted link.
  public let requiresEncryption: Bool
  /// Incoming channels, in the order they came; finishes after ``close()``. At most
  /// 8 channels wait here untaken; a channel arriving beyond that is closed.
  public let channels: AsyncStream<L2CAPChannel>

  private let core: ListenerCore

  private init(psm: L2CAPPSM, requiresEncryption: Bool, core: ListenerCore) {
    self.psm = psm
    self.requiresEncryption = requiresEncryption
    self.core = core
    channels = core.start(psm: psm)
  }

  deinit { core.close() }

  public var description: String { "L2CAP listener on PSM \(psm)" }

  /// Publishes a PSM on the adapter whose address is `local` (nil: every adapter), LE
  /// `addressType` (the adapter's own type). Without `psm` the kernel picks a free dynamic
  /// one (0x0080-0x00FF).
  ///
  /// - Throws: ``BluetoothError/Code/addressInUse`` when the PSM is taken,
  ///   ``BluetoothError/Code/notPermitted`` for a SIG-assigned PSM (below 0x80)
  ///   without `CAP_NET_BIND_SERVICE`, ``BluetoothError/Code/l2capUnavailable`` without
  ///   Bluetooth sockets or when `local` is no adapter's address.
  public static func listen(
    on local: BluetoothAddress? = nil, addressType: AddressType = .public,
    psm: L2CAPPSM? = nil, requireEncryption: Bool = false
  ) throws(BluetoothError) -> L2CAPListener {
    let fd = try L2CAPSocket.open()
    do throws(BluetoothError) {
      try L2CAPSocket.bind(
        fd,
        L2CAPSocketAddress(
          address: local ?? L2CAPSocketAddress.anyAddress,
          kind: L2CAPSocketAddress.Kind(addressType), psm: psm?.rawValue ?? 0))
      L2CAPSocket.requestReceiveMTU(fd, L2CAPSocket.preferredReceiveMTU)
      if requireEncryption {
        try L2CAPSocket.setSecurity(fd, level: L2CAPSocket.securityMedium)
      }
      try L2CAPSocket.listen(fd)
      let bound = try L2CAPSocket.localAddress(fd)
      guard let chosen = L2CAPPSM(rawValue: bound.psm) else {
        throw BluetoothError(.system, "the kernel bound PSM \(bound.psm), outside the LE range")
      }
      return L2CAPListener(
        psm: chosen, requiresEncryption: requireEncryption, core: ListenerCore(fd: fd))
    } catch {
      Syscall.close(fd)
      if error.code == .l2capUnavailable, let local {
        throw BluetoothError(
          .l2capUnavailable, "no Bluetooth adapter has the address \(local) (\(error.message))",
          errno: error.errno)
      }
      throw error
    }
  }

  /// Unpublishes the PSM; ``channels`` finishes. Idempotent.
  public func close() { core.close() }
}

/// The listening descriptor, non-blocking: an accept loop in a task of its own that waits on
/// the ``Reactor`` while no channel comes in. Accepts and `close` of the descriptor happen under
/// one lock; ``close()`` shuts it down and releases its reactor wait, which wakes the loop.
final class ListenerCore: Sendable {
  private struct State {
    var fd: Int32?
    var closing = false
  }
  private let state: Mutex<State>
  /// How many accepted channels wait at most for the consumer.
  static let waiting = 8

  init(fd: Int32) {
    L2CAPSocket.setNonBlocking(fd)
    state = Mutex(State(fd: fd))
  }

  /// What one accept under the lock found.
  private enum Step {
    case accepted(Int32, L2CAPSocketAddress?)
    case wait(ReactorWait)
    case stop
  }

  func start(psm: L2CAPPSM) -> AsyncStream<L2CAPChannel> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: L2CAPChannel.self, bufferingPolicy: .bufferingOldest(Self.waiting))
    continuation.onTermination = { [weak self] termination in
      if case .cancelled = termination { self?.close() }
    }
    Task.detached { [self] in
      accepting: while true {
        let step = state.withLock { state -> Step in
          guard !state.closing, let fd = state.fd else { return .stop }
          do throws(BluetoothError) {
            let (client, peer) = try L2CAPSocket.accept(fd)
            return .accepted(client, peer)
          } catch {
            if error.errno == EAGAIN || error.errno == EWOULDBLOCK {
              return .wait(Reactor.shared.arm(fd, for: .readable))
            }
            // The adapter went away.
            return .stop
          }
        }
        switch step {
        case .stop:
          break accepting
        case .wait(let wait):
          // Not cancellable (the task is the listener's own); close() releases the wait.
          _ = try? await wait.value()
        case .accepted(let client, let peer):
          guard let peer else {
            Syscall.close(client)
            continue
          }
          // Beyond the buffer the channel is dropped, which closes it.
          if let channel = try? L2CAPChannel(fd: client, peer: peer, psm: psm) {
            continuation.yield(channel)
          }
        }
      }
      continuation.finish()
      state.withLock { state in
        if let fd = state.fd {
          Reactor.shared.release(fd)
          Syscall.close(fd)
          state.fd = nil
        }
      }
    }
    return stream
  }

  func close() {
    state.withLock { state in
      guard !state.closing else { return }
      state.closing = true
      if let fd = state.fd {
        Syscall.shutdown(fd, Int32(SHUT_RDWR))
        Reactor.shared.release(fd)
      }
    }
  }
}
