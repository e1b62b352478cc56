// WriteWithoutResponseChannel: write commands to one characteristic through the socket
// bluetoothd hands out for them (AcquireWrite), one value per datagram, with back-pressure.
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A socket for writes without response to one characteristic, from
/// ``Peripheral/openWriteWithoutResponseChannel(for:)``.
///
/// Each ``send(_:timeout:)`` is one ATT Write Command: bluetoothd reads one datagram from the
/// socket and sends it to the peripheral, without a D-Bus round trip per value. When
/// bluetoothd falls behind, the socket fills and `send` waits for room (CoreBluetooth's
/// `canSendWriteWithoutResponse`, as back-pressure). Write commands are not acknowledged:
/// a value the peripheral drops is not reported.
///
/// ```swift
/// let channel = try await peripheral.openWriteWithoutResponseChannel(for: uartRX)
/// for line in ["hello\n", "world\n"] { try await channel.send(Array(line.utf8)) }
/// channel.close()
/// ```
///
/// While the channel is open, bluetoothd reports the characteristic as write-acquired, refuses
/// a second channel and refuses ``Peripheral/writeValue(_:for:type:)`` on it (`.notPermitted`).
/// ``close()`` (or the channel's release) gives the socket back; bluetoothd closes it when the
/// link drops, and the next ``send(_:timeout:)`` then throws `.disconnected`.
public final class WriteWithoutResponseChannel: Sendable {
  /// The characteristic written.
  public let characteristic: RemoteCharacteristic
  /// The ATT MTU bluetoothd reported for the link when the channel opened.
  public let mtu: Int
  /// The longest value one ``send(_:timeout:)`` takes: MTU - 3 (the Write Command's opcode and
  /// handle), at most 512.
  public var maximumValueLength: Int { min(max(mtu - 3, 20), 512) }

  /// The descriptor, or -1 once closed (closing takes the lock, so no send uses a closed one,
  /// and no wait on BLEKit's ``Reactor`` is armed for it after closing released them).
  private let fd: Mutex<Int32>

  init(characteristic: RemoteCharacteristic, fd: Int32, mtu: Int) {
    self.characteristic = characteristic
    self.mtu = mtu
    let flags = Syscall.fcntl(fd, F_GETFL)
    _ = Syscall.fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    self.fd = Mutex(fd)
  }

  deinit { close() }

  /// Whether ``close()`` ran.
  public var isClosed: Bool { fd.withLock { $0 < 0 } }

  /// Sends `value` as one write command, waiting up to `timeout` while the socket is full.
  ///
  /// - Throws: ``BluetoothError`` `.notSupported` for an empty value or one longer than
  ///   ``maximumValueLength``; `.disconnected` when the link or bluetoothd closed the socket
  ///   (or the channel was closed); `.timeout` when no room came within `timeout`;
  ///   `.cancelled` when the task was cancelled while waiting for room (the value not sent).
  public func send(_ value: [UInt8], timeout: Duration = .seconds(30))
    async throws(BluetoothError)
  {
    guard !value.isEmpty else {
      // An empty datagram reads as the end of the stream on bluetoothd's side.
      throw BluetoothError(.notSupported, "an empty value cannot be sent through the channel")
    }
    guard value.count <= maximumValueLength else {
      throw BluetoothError(
        .notSupported,
        "a value of \(value.count) bytes exceeds this link's \(maximumValueLength)-byte "
          + "limit for a write command (MTU \(mtu))")
    }
    let deadline = ContinuousClock.now + timeout
    while true {
      switch attempt(value, until: deadline) {
      case .sent: return
      case .closed(let why):
        throw BluetoothError(
          .disconnected, "the write channel to \(characteristic.uuid) is closed (\(why))")
      case .full(let wait):
        let wake: ReactorWait.Wake
        do {
          wake = try await wait.value()
        } catch {
          throw BluetoothError(
            .cancelled, "cancelled while waiting for room to write \(characteristic.uuid)")
        }
        // Ready (or hung up) and released (closed) meanwhile: the next attempt tells which.
        guard wake != .timedOut else {
          throw BluetoothError(
            .timeout,
            "no room to write \(characteristic.uuid) within \(timeout): the peripheral or "
              + "bluetoothd is not taking write commands")
        }
      }
    }
  }

  /// Waits until bluetoothd has read every value sent (nothing is left in the socket), at
  /// most `timeout`; false when time ran out or the channel is closed. The values may still be
  /// queued in the kernel for the radio: a write command is never acknowledged.
  public func drain(timeout: Duration = .seconds(30)) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
      let unread = fd.withLock { fd -> Int32? in
        guard fd >= 0 else { return nil }
        var queued: Int32 = 0
        return Syscall.ioctl(fd, UInt(TIOCOUTQ), &queued) == 0 ? queued : nil
      }
      guard let unread else { return false }
      if unread == 0 { return true }
      guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
      try? await Task.sleep(for: .milliseconds(5))
    }
  }

  /// Gives the socket back to bluetoothd. Safe to call more than once.
  public func close() {
    fd.withLock { fd in
      guard fd >= 0 else { return }
      Reactor.shared.release(fd)
      Syscall.close(fd)
      fd = -1
    }
  }

  private enum Attempt {
    case sent
    /// Full: a wait for room, armed with the send's deadline.
    case full(ReactorWait)
    case closed(String)
  }

  private func attempt(_ value: [UInt8], until deadline: ContinuousClock.Instant) -> Attempt {
    fd.withLock { fd in
      guard fd >= 0 else { return .closed("closed by this process") }
      while true {
        let written = value.withUnsafeBytes {
          Syscall.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        if written == value.count { return .sent }
        if written >= 0 { return .closed("a short write of \(written) bytes") }
        switch errno {
        case EINTR: continue
        case EAGAIN, EWOULDBLOCK, ENOBUFS:
          return .full(Reactor.shared.arm(fd, for: .writable, until: deadline))
        default: return .closed(String(cString: strerror(errno)))
        }
      }
    }
  }
}
