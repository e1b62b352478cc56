import BlueZ
import DBus
import Dispatch
import Synchronization

// Our end of an AcquireNotify socket: one datagram per notification, with back-pressure.
#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// The socket bluetoothd handed out with `AcquireNotify`.
///
/// ``send(_:)`` never blocks: when the socket is full it says so and arms a writable wait on
/// BLEKit's ``Reactor`` that calls `onWritable` once there is room again. A readable wait
/// notices the hang-up bluetoothd causes when the last central unsubscribes or disconnects
/// (or, with per-device sockets, when this socket's central does), and calls `onClosed` once;
/// each byte 0x01 bluetoothd writes (a central's confirmation of an indication, BlueZ 5.80 and
/// later) calls `onConfirmation`. `onWritable` and `onConfirmation` run on the socket's serial
/// queue, one at a time; ``close()`` releases both waits (before the descriptor can close,
/// which happens when the last reference to this socket goes).
final class NotifySocket: Sendable {
  enum SendResult: Equatable {
    case sent
    /// The socket is full; `onWritable` runs when there is room.
    case full
    /// bluetoothd closed its end: nobody is subscribed any more.
    case closed
  }

  let mtu: Int
  let central: Central?
  private let socket: FileDescriptor
  /// Where `onWritable` and `onConfirmation` run, one at a time.
  private let queue = DispatchQueue(label: "blekit.notify-socket")
  private let onWritable: @Sendable () -> Void
  private let onClosed: @Sendable () -> Void
  private let onConfirmation: @Sendable () -> Void

  private struct State {
    var closed = false
    var waitingForRoom = false
    /// A value accepted by ``sendOrHold(_:)`` while the socket was full, written first once
    /// there is room.
    var held: [UInt8]?
  }
  private let state = Mutex(State())

  init(
    _ acquired: GattAcquiredSocket, onWritable: @escaping @Sendable () -> Void,
    onClosed: @escaping @Sendable () -> Void,
    onConfirmation: @escaping @Sendable () -> Void = {}
  ) {
    self.socket = acquired.socket
    self.mtu = acquired.mtu
    self.central = Central(acquired.device)
    self.onWritable = onWritable
    self.onClosed = onClosed
    self.onConfirmation = onConfirmation
  }

  deinit {
    // Before `socket` closes the descriptor: no wait may outlive it.
    Reactor.shared.release(socket.rawValue)
  }

  /// Starts watching for the hang-up. Call once, after init.
  func start() {
    Task.detached { [weak self] in
      while true {
        // Holds the socket only between waits: dropping it ends the watch (deinit releases).
        guard let wait = self?.armRead() else { return }
        guard (try? await wait.value()) == .ready, let socket = self else { return }
        await withCheckedContinuation { continuation in
          socket.queue.async {
            socket.drainOrHangUp()
            continuation.resume()
          }
        }
      }
    }
  }

  /// A readable wait, unless the socket is closed (armed under the lock that ``close()``
  /// releases it under, so none is armed after that).
  private func armRead() -> ReactorWait? {
    state.withLock { state in
      state.closed ? nil : Reactor.shared.arm(socket.rawValue, for: .readable)
    }
  }

  /// The largest notification value: min(MTU - 3, 512).
  var maximumValueLength: Int { min(mtu - 3, 512) }

  var isClosed: Bool { state.withLock { $0.closed } }

  /// True while a value held by ``sendOrHold(_:)`` waits for room.
  var isHolding: Bool { state.withLock { $0.held != nil } }

  /// Writes one notification without blocking; when the socket is full, keeps it and writes
  /// it first once there is room (one value at most: call only when ``isHolding`` is false).
  /// For a value that goes to several sockets at once, where "full" on one of them must not
  /// make the caller send it again to the others.
  func sendOrHold(_ value: [UInt8]) -> SendResult {
    switch send(value) {
    case .full:
      state.withLock { $0.held = value }
      return .sent
    case let result:
      return result
    }
  }

  /// Writes one notification without blocking.
  func send(_ value: [UInt8]) -> SendResult {
    if isClosed { return .closed }
    let written = value.withUnsafeBytes { buffer in
      Syscall.send(
        socket.rawValue, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
    }
    if written >= 0 { return .sent }
    switch errno {
    case EAGAIN, EWOULDBLOCK, ENOBUFS:
      armWriteSource()
      return .full
    case EINTR:
      return send(value)
    default:
      close()
      return .closed
    }
  }

  /// Stops watching and lets the descriptor close (bluetoothd sees a hang-up). Idempotent.
  func close() {
    let first = state.withLock { state in
      defer { state.closed = true }
      if !state.closed { Reactor.shared.release(socket.rawValue) }
      return !state.closed
    }
    guard first else { return }
    onClosed()
  }

  private func armWriteSource() {
    let wait: ReactorWait? = state.withLock { state in
      guard !state.waitingForRoom, !state.closed else { return nil }
      state.waitingForRoom = true
      return Reactor.shared.arm(socket.rawValue, for: .writable)
    }
    guard let wait else { return }
    Task.detached { [weak self] in
      // Released: closed (or dropped) meanwhile, so nobody waits for room any more.
      guard (try? await wait.value()) == .ready, let socket = self else { return }
      socket.queue.async { socket.roomAgain() }
    }
  }

  /// There is room: writes the held value first, then says so (unless it filled the socket
  /// again: then the wait that `send` armed says so later).
  private func roomAgain() {
    let held = state.withLock { state in
      defer {
        state.waitingForRoom = false
        state.held = nil
      }
      return state.held
    }
    if let held, send(held) == .full {
      // Still no room: keep it, and the new wait armed by send waits again.
      state.withLock { $0.held = held }
      return
    }
    onWritable()
  }

  /// Reads what bluetoothd wrote (a 0x01 per confirmed indication) or notices the hang-up.
  private func drainOrHangUp() {
    var buffer = [UInt8](repeating: 0, count: 16)
    while true {
      let count = buffer.withUnsafeMutableBytes {
        Syscall.recv(socket.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
      }
      if count > 0 {
        for byte in buffer[..<count] where byte == 0x01 { onConfirmation() }
        continue
      }
      if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      if count < 0 && errno == EINTR { continue }
      close()
      return
    }
  }
}
