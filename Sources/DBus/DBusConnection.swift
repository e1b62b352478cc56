// DBusConnection: the one owner of a libdbus connection. Opening, closing, method calls.
import CDBus
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A private connection to a message bus.
///
/// Every libdbus call on the connection happens on one serial queue. The process's `Reactor`
/// waits on the socket for every connection and enters the queue (`queue.sync`) to read and
/// write; libdbus's timeouts are Dispatch timers on the queue. No thread blocks per call.
/// Call `close()` when done: the connection keeps itself alive while it is open.
public final class DBusConnection: @unchecked Sendable {
  // Why @unchecked Sendable is safe: this class is the single owner of the DBusConnection*
  // `raw`. Every libdbus call on it, and every read or write of the `var` state below, happens
  // on the serial `queue` (asserted with `assertOnQueue()`). Lets and atomics are safe anywhere.

  let raw: OpaquePointer
  let queue: DispatchQueue
  private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

  /// This connection's unique name on the bus (`:1.42`).
  public let uniqueName: BusName
  /// Whether unix fds can be sent on this connection.
  public let canSendFileDescriptors: Bool

  /// Where exported-method handler Tasks start (see `QueueTaskExecutor`).
  let handlerExecutor: QueueTaskExecutor
  /// ``executor``: runs in the queue's turns (`QueueTaskExecutor.turn(_:)`).
  let callerExecutor: QueueTaskExecutor

  /// A TaskExecutor running on this connection's queue. Code that makes many calls in a row
  /// can run under `withTaskExecutorPreference(connection.executor)` to save a thread hop per
  /// call and per reply: a call is sent from the queue, and the caller resumes on the thread
  /// that read its reply (the process's reactor thread), in the same turn of the queue. It
  /// then shares that thread with every descriptor the process waits on, so it must not block.
  public var executor: any TaskExecutor { callerExecutor }

  let closedFlag = Atomic<Bool>(false)
  let nextID = Atomic<UInt64>(1)

  // Queue-confined state.
  var watchSources: [OpaquePointer: WatchSources] = [:]
  /// One timer for every pending call's deadline (libdbus gets infinite timeouts).
  var watchReconcileScheduled = false
  var callTimer: (any DispatchSourceTimer)?
  var callTimerDeadline: DispatchTime?
  var timeoutSources: [OpaquePointer: any DispatchSourceTimer] = [:]
  var dispatchScheduled = false
  /// Set while a watch is handled: a dispatch follows at once, none needs scheduling.
  var dispatchFollows = false
  var pendingCalls: [UInt64: PendingCall] = [:]
  var cancelledCalls: Set<UInt64> = []
  var subscriptions: [UInt64: Subscription] = [:] {
    didSet { subscriptionsInOrder = nil }
  }
  /// `subscriptions` sorted by id (the order they were made), kept until they change: every
  /// incoming signal walks them in this order.
  var subscriptionsInOrder: [Subscription]?
  var objects: [ObjectPath: ExportedObject] = [:]
  var objectManagers: Set<ObjectPath> = []
  /// Who may call each object manager (see ``ExportedObject/admit``); absent: anyone.
  var managerAdmissions: [ObjectPath: @Sendable (BusName) throws(DBusError) -> Void] = [:]

  private static let threadsInitialized: Bool = {
    dbus_threads_init_default() != 0
  }()

  // MARK: Opening

  /// Connects to the system bus (honours `DBUS_SYSTEM_BUS_ADDRESS`).
  public static func system() throws(DBusError) -> DBusConnection {
    let address =
      environmentValue("DBUS_SYSTEM_BUS_ADDRESS")
      ?? "unix:path=/var/run/dbus/system_bus_socket"
    return try DBusConnection(address: address)
  }

  /// Connects to the session bus (`DBUS_SESSION_BUS_ADDRESS`).
  public static func session() throws(DBusError) -> DBusConnection {
    guard let address = environmentValue("DBUS_SESSION_BUS_ADDRESS") else {
      throw DBusError(
        code: .connectionFailed, message: "DBUS_SESSION_BUS_ADDRESS is not set")
    }
    return try DBusConnection(address: address)
  }

  /// Opens a private connection to the bus at `address` and registers on it (`Hello`).
  ///
  /// The registration is the one blocking exchange (`dbus_bus_register`), done before the
  /// connection is handed to the dispatch queue.
  public convenience init(address: String) throws(DBusError) {
    _ = Self.threadsInitialized
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    guard let raw = dbus_connection_open_private(address, &error) else {
      throw DBusError(libdbus: &error, code: .connectionFailed)
    }
    dbus_connection_set_exit_on_disconnect(raw, 0)
    guard dbus_bus_register(raw, &error) != 0, let name = dbus_bus_get_unique_name(raw) else {
      let failure =
        dbus_error_is_set(&error) != 0
        ? DBusError(libdbus: &error, code: .connectionFailed)
        : DBusError(code: .connectionFailed, message: "registration on the bus failed")
      dbus_connection_close(raw)
      dbus_connection_unref(raw)
      throw failure
    }
    self.init(raw: raw, uniqueName: BusName(unchecked: String(cString: name)))
  }

  private init(raw: OpaquePointer, uniqueName: BusName) {
    self.raw = raw
    self.uniqueName = uniqueName
    self.canSendFileDescriptors = dbus_connection_can_send_type(raw, TypeCode.unixFD) != 0
    self.queue = DispatchQueue(label: "blekit.dbus.\(uniqueName.rawValue)")
    self.handlerExecutor = QueueTaskExecutor(queue: queue)
    self.callerExecutor = QueueTaskExecutor(queue: queue, runsInTurns: true)
    queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
    queue.sync { installHooks() }
  }

  deinit {
    // Only reached once closed (open connections keep themselves alive), so nothing else
    // touches `raw` now.
    dbus_connection_unref(raw)
  }

  /// Whether `close()` was called or the connection was lost.
  public var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

  @inline(__always)
  func assertOnQueue() {
    dispatchPrecondition(condition: .onQueue(queue))
  }

  var isOnQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }

  /// Whether the current thread runs inside any connection's queue (this one or another).
  var isOnAnyConnectionsQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) != nil }

  /// Runs `body` on the queue and waits for it (directly if already on it).
  func onQueueSync<T>(_ body: () throws(DBusError) -> T) throws(DBusError) -> T {
    if isOnQueue { return try body() }
    let result: Result<T, DBusError> = queue.sync {
      do throws(DBusError) { return .success(try body()) } catch { return .failure(error) }
    }
    return try result.get()
  }

  // MARK: Closing

  /// Closes the connection. Idempotent. Pending calls fail with `.disconnected`, signal streams
  /// finish, exported objects are dropped. (When the bus goes away, the same happens by itself,
  /// except that signal streams end with `.disconnected`.)
  public func close() {
    if isOnQueue {
      shutDown(reason: "the connection was closed")
    } else {
      queue.sync { shutDown(reason: "the connection was closed") }
    }
  }

  /// Tears everything down; on the queue. `insideDispatch` is true when called from the
  /// message filter (libdbus's dispatch is not re-entrant, so nothing is drained then). `lost`:
  /// the bus went away (signal streams then end with `.disconnected`, not normally).
  func shutDown(reason: String, lost: Bool = false, insideDispatch: Bool = false) {
    assertOnQueue()
    guard !closedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
    let calls = pendingCalls
    pendingCalls.removeAll()
    cancelledCalls.removeAll()
    for (_, call) in calls {
      dbus_pending_call_cancel(call.pending)
      dbus_pending_call_unref(call.pending)
      call.continuation.resume(returning: .failure(.disconnectedError(reason)))
    }
    let streams = subscriptions
    subscriptions.removeAll()
    for (_, subscription) in streams {
      subscription.finish(lost ? .disconnectedError(reason) : nil)
    }
    objects.removeAll()
    objectManagers.removeAll()
    managerAdmissions.removeAll()
    dbus_connection_close(raw)
    // Drain what libdbus queued (the local Disconnected signal) with our filter removed.
    removeHooks()
    if !insideDispatch {
      while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
    }
    for (_, entry) in watchSources { entry.cancel() }
    watchSources.removeAll()
    callTimer?.cancel()
    callTimer = nil
    for (_, timer) in timeoutSources { timer.cancel() }
    timeoutSources.removeAll()
  }

  // MARK: Sending

  /// Checks fd support and the closed flag before a message is queued.
  func checkSendable(_ message: DBusMessage) throws(DBusError) {
    if isClosed { throw DBusError.disconnectedError() }
    if !canSendFileDescriptors && dbus_message_contains_unix_fds(message.raw) != 0 {
      throw DBusError.invalid("this connection cannot carry unix file descriptors")
    }
  }

  /// Queues a message for sending, transferring ownership to the queue.
  public func send(_ message: DBusMessage) throws(DBusError) {
    try checkSendable(message)
    // The message was built by the caller and is not touched by it again: ownership moves to
    // the queue, so crossing threads here is safe.
    if isOnQueue {
      _ = dbus_connection_send(raw, message.raw, nil)
      return
    }
    nonisolated(unsafe) let owned = message
    queue.async {
      guard !self.isClosed else { return }
      _ = dbus_connection_send(self.raw, owned.raw, nil)
    }
  }

  /// Sends a method call without waiting for a reply (NO_REPLY_EXPECTED).
  public func send(
    destination: BusName, path: ObjectPath, interface: InterfaceName, member: MemberName,
    arguments: [DBusValue] = []
  ) throws(DBusError) {
    let message = try DBusMessage.methodCall(
      destination: destination, path: path, interface: interface, member: member)
    message.noReplyExpected = true
    try message.append(arguments)
    try send(message)
  }

  /// Emits a signal from this connection (to `destination` only, if given).
  public func emitSignal(
    path: ObjectPath, interface: InterfaceName, member: MemberName, arguments: [DBusValue],
    destination: BusName? = nil
  ) throws(DBusError) {
    let message = try DBusMessage.signal(path: path, interface: interface, member: member)
    if let destination, dbus_message_set_destination(message.raw, destination.rawValue) == 0 {
      throw DBusError.noMemoryError
    }
    try message.append(arguments)
    try send(message)
  }

  /// Calls a method and returns the reply's body. Timeout default 25 s. Cancelling the task
  /// cancels the pending call (`.cancelled`); in a task already cancelled the call is not sent
  /// at all, so cleanup on the way out of one goes through ``runCleanup(within:_:)``.
  ///
  /// An error reply throws `.remote` with its name and message; no reply in time throws
  /// `.timeout`; a peer that leaves without replying throws `.noReply`.
  public func call(
    destination: BusName, path: ObjectPath, interface: InterfaceName, member: MemberName,
    arguments: [DBusValue] = [], timeout: Duration = .seconds(25)
  ) async throws(DBusError) -> [DBusValue] {
    let message = try DBusMessage.methodCall(
      destination: destination, path: path, interface: interface, member: member)
    try message.append(arguments)
    return try await call(
      message, timeout: timeout,
      label: CallLabel(
        interface: interface.rawValue, member: member.rawValue, path: path.rawValue))
  }

  /// Calls a method and checks the reply's signature, throwing `.unexpectedReply` on mismatch.
  public func call(
    destination: BusName, path: ObjectPath, interface: InterfaceName, member: MemberName,
    arguments: [DBusValue] = [], replySignature: Signature, timeout: Duration = .seconds(25)
  ) async throws(DBusError) -> [DBusValue] {
    let values = try await call(
      destination: destination, path: path, interface: interface, member: member,
      arguments: arguments, timeout: timeout)
    var actual = ""
    for value in values { value.appendSignature(to: &actual) }
    guard actual == replySignature.rawValue else {
      throw DBusError(
        code: .unexpectedReply,
        message:
          "\(interface).\(member) on \(path) replied \"\(actual)\", expected \"\(replySignature)\"")
    }
    return values
  }

  /// Sends a prepared method call and waits for its reply.
  public func call(_ message: DBusMessage, timeout: Duration = .seconds(25), what: String? = nil)
    async throws(DBusError) -> [DBusValue]
  {
    let label =
      what.map(CallLabel.init)
      ?? CallLabel(
        interface: message.interface?.rawValue, member: message.member?.rawValue ?? "?",
        path: message.path?.rawValue ?? "?")
    return try await call(message, timeout: timeout, label: label)
  }

  private func call(_ message: DBusMessage, timeout: Duration, label: CallLabel)
    async throws(DBusError) -> [DBusValue]
  {
    try checkSendable(message)
    let id = nextID.add(1, ordering: .relaxed).newValue
    let timeoutMS = Self.milliseconds(timeout)
    // Ownership of the message moves to the queue (see `send(_:)`).
    nonisolated(unsafe) let owned = message
    let result: Result<[DBusValue], DBusError> = await withTaskCancellationHandler {
      await withUnsafeContinuation { continuation in
        let start: @Sendable () -> Void = {
          self.startCall(
            id: id, message: owned, timeoutMS: timeoutMS, timeout: timeout, what: label,
            continuation: continuation)
        }
        if isOnQueue {
          // The caller runs on `executor`: no hop needed.
          start()
        } else if isOnAnyConnectionsQueue {
          // A caller inside another connection's queue (an exported method's handler, which
          // starts there) hands the call over: a thread that holds one queue never waits for
          // another, so two connections whose handlers call each other cannot wait for each
          // other.
          queue.async(execute: start)
        } else {
          // Sent from the caller's thread: the queue's turns are short and never wait for a
          // task, so entering it costs less than waking a thread to send (one context switch
          // per call, measured by scripts/bench-dbus).
          queue.sync(execute: start)
        }
      }
    } onCancel: {
      queue.async { self.cancelCall(id: id) }
    }
    return try result.get()
  }

  static func milliseconds(_ duration: Duration) -> Int32 {
    let (seconds, attoseconds) = duration.components
    if seconds < 0 { return 0 }
    if seconds >= Int64(Int32.max / 1000) { return blekit_timeout_infinite() }
    let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    return Int32(max(ms, 1))
  }
}

/// The value of the environment variable `name`, if set (read with `getenv`: this module
/// does without Foundation).
private func environmentValue(_ name: String) -> String? {
  getenv(name).map { String(cString: $0) }
}
