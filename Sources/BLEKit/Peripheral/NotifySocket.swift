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
/// ``send(_:)`` never blocks: when the socket is full it says so and arms a write source that
/// calls `onWritable` once there is room again. A read source notices the hang-up bluetoothd
/// causes when the last central unsubscribes or disconnects (or, with per-device sockets,
/// when this socket's central does), and calls `onClosed` once; each byte 0x01 bluetoothd
/// writes (a central's confirmation of an indication, BlueZ 5.80 and later) calls
/// `onConfirmation`.
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
  private let queue = DispatchQueue(label: "blekit.notify-socket")
  private let sources: SocketSources
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
    self.sources = SocketSources()
  }

  /// Starts watching for the hang-up. Call once, after init.
  func start() {
    let socket = self.socket
    let read = DispatchSource.makeReadSource(fileDescriptor: socket.rawValue, queue: queue)
    read.setEventHandler { [weak self] in self?.drainOrHangUp() }
    // The cancel handler keeps the descriptor open until dispatch has let go of it.
    read.setCancelHandler { _ = socket }
    sources.set(read: read)
    read.activate()
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
      return !state.closed
    }
    guard first else { return }
    sources.cancelAll()
    onClosed()
  }

  private func armWriteSource() {
    let arm = state.withLock { state in
      defer { state.waitingForRoom = true }
      return !state.waitingForRoom && !state.closed
    }
    guard arm else { return }
    let socket = self.socket
    let write = DispatchSource.makeWriteSource(fileDescriptor: socket.rawValue, queue: queue)
    write.setEventHandler { [weak self] in
      guard let self else { return }
      self.sources.cancelWrite()
      let held = self.state.withLock { state in
        defer {
          state.waitingForRoom = false
          state.held = nil
        }
        return state.held
      }
      if let held, self.send(held) == .full {
        // Still no room: keep it, and the new write source armed by send waits again.
        self.state.withLock { $0.held = held }
        return
      }
      self.onWritable()
    }
    write.setCancelHandler { _ = socket }
    sources.set(write: write)
    write.activate()
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

/// The dispatch sources of one socket.
///
/// `@unchecked Sendable`: dispatch source objects are thread-safe (libdispatch allows every
/// operation used here from any thread); which sources exist is only read and changed under
/// `lock`, and no source escapes it.
private final class SocketSources: @unchecked Sendable {
  private let lock = Mutex(())
  nonisolated(unsafe) private var read: (any DispatchSourceRead)?
  nonisolated(unsafe) private var write: (any DispatchSourceWrite)?

  func set(read source: any DispatchSourceRead) { lock.withLock { _ in read = source } }
  func set(write source: any DispatchSourceWrite) { lock.withLock { _ in write = source } }

  func cancelWrite() {
    lock.withLock { _ in
      write?.cancel()
      write = nil
    }
  }

  func cancelAll() {
    lock.withLock { _ in
      read?.cancel()
      write?.cancel()
      read = nil
      write = nil
    }
  }
}
