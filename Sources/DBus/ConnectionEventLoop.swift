// Bridging libdbus's main-loop hooks to Dispatch: read watches -> a ReadWatchThread (or a read
// DispatchSource), write watches -> write DispatchSources, timeouts -> timer sources, dispatch
// status and wakeup -> dispatching on the queue.
import CDBus
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

extension DBusConnection {
  static func connection(_ data: UnsafeMutableRawPointer?) -> DBusConnection {
    Unmanaged<DBusConnection>.fromOpaque(data!).takeUnretainedValue()
  }

  /// Installs watch, timeout, dispatch-status and wakeup hooks and the message filter.
  /// The hooks hold the connection unretained: `shutDown` removes them before it can go away.
  func installHooks() {
    assertOnQueue()
    let me = Unmanaged.passUnretained(self).toOpaque()
    dbus_connection_set_watch_functions(
      raw,
      { watch, data in
        DBusConnection.connection(data).addWatch(watch!)
        return 1
      },
      { watch, data in DBusConnection.connection(data).removeWatch(watch!) },
      { watch, data in DBusConnection.connection(data).toggleWatch(watch!) },
      me, nil)
    dbus_connection_set_timeout_functions(
      raw,
      { timeout, data in
        DBusConnection.connection(data).timeoutChanged(timeout!)
        return 1
      },
      { timeout, data in DBusConnection.connection(data).removeTimeout(timeout!) },
      { timeout, data in DBusConnection.connection(data).timeoutChanged(timeout!) },
      me, nil)
    dbus_connection_set_dispatch_status_function(
      raw,
      { _, status, data in
        if status == DBUS_DISPATCH_DATA_REMAINS {
          DBusConnection.connection(data).scheduleDispatch()
        }
      }, me, nil)
    dbus_connection_set_wakeup_main_function(
      raw, { data in DBusConnection.connection(data).scheduleDispatch() }, me, nil)
    _ = dbus_connection_add_filter(raw, messageFilter, me, nil)
    scheduleDispatch()
  }

  func removeHooks() {
    assertOnQueue()
    let me = Unmanaged.passUnretained(self).toOpaque()
    dbus_connection_remove_filter(raw, messageFilter, me)
    dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
    dbus_connection_set_wakeup_main_function(raw, nil, nil, nil)
    dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
    dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
  }

  // MARK: Watches

  /// Added: create the watch's read and/or write sources, active only if the watch is enabled.
  /// Toggled: suspend or resume them (cheap; no epoll churn per send). Removed: cancel them.
  /// Reading is done by a ``ReadWatchThread`` (one wake-up less per incoming message than a
  /// Dispatch read source, which remains the fallback when no thread can be started).
  ///
  /// Each source watches a duplicate of the watch's descriptor, closed by the source's cancel
  /// handler. libdbus closes its descriptor right after removing the watch, while Dispatch
  /// may still have the cancelled source registered until the handler runs; had the source
  /// used libdbus's descriptor, a new connection could get the same number in that window and
  /// Dispatch's event loop would act on the wrong file (seen: a crash in
  /// `_dispatch_event_loop_drain` while tests opened and closed connections in parallel).
  private func addWatch(_ watch: OpaquePointer) {
    assertOnQueue()
    removeWatch(watch)
    let fd = dbus_watch_get_unix_fd(watch)
    let flags = dbus_watch_get_flags(watch)
    let watchBits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(watch)))
    var sources: [any DispatchSourceProtocol] = []
    var readers: [ReadWatchThread] = []
    let readable = flags & DBUS_WATCH_READABLE.rawValue != 0
    if readable, let reader = makeReadWatchThread(fd: fd, watchBits: watchBits) {
      readers.append(reader)
    } else if readable {
      let own = Self.sourceDescriptor(for: fd)
      let source = DispatchSource.makeReadSource(fileDescriptor: own, queue: queue)
      source.setEventHandler { [self] in
        self.handleWatch(watchBits, DBUS_WATCH_READABLE.rawValue)
      }
      if own != fd { source.setCancelHandler { _ = Syscall.close(own) } }
      sources.append(source)
    }
    if flags & DBUS_WATCH_WRITABLE.rawValue != 0 {
      let own = Self.sourceDescriptor(for: fd)
      let source = DispatchSource.makeWriteSource(fileDescriptor: own, queue: queue)
      source.setEventHandler { [self] in
        self.handleWatch(watchBits, DBUS_WATCH_WRITABLE.rawValue)
      }
      if own != fd { source.setCancelHandler { _ = Syscall.close(own) } }
      sources.append(source)
    }
    // New sources start suspended; resume them now if the watch is enabled.
    let enabled = dbus_watch_get_enabled(watch) != 0
    if enabled {
      for source in sources { source.resume() }
      for reader in readers { reader.resume() }
    }
    watchSources[watch] = WatchSources(
      sources: sources, readers: readers, active: enabled, wanted: enabled)
  }

  /// A reading thread for the watch on `fd`, owning a duplicate of it (see ``addWatch(_:)``).
  private func makeReadWatchThread(fd: Int32, watchBits: UInt) -> ReadWatchThread? {
    let own = Syscall.fcntl(fd, F_DUPFD_CLOEXEC, 0)
    guard own >= 0 else { return nil }
    let reader = ReadWatchThread(fd: own, queue: queue) { [self] flags in
      self.handleWatch(watchBits, flags)
    }
    if reader == nil { _ = Syscall.close(own) }
    return reader
  }

  /// A close-on-exec duplicate of `fd` for a Dispatch source to own, or `fd` itself when no
  /// descriptor is left to duplicate into.
  private static func sourceDescriptor(for fd: Int32) -> Int32 {
    let own = Syscall.fcntl(fd, F_DUPFD_CLOEXEC, 0)
    return own >= 0 ? own : fd
  }

  /// Records the watch's wanted state and applies it at the end of this queue turn: libdbus
  /// enables and disables the write watch around every send that completes at once, and
  /// applying both would cost two epoll updates per message for nothing.
  private func toggleWatch(_ watch: OpaquePointer) {
    assertOnQueue()
    guard watchSources[watch] != nil else { return }
    watchSources[watch]!.wanted = dbus_watch_get_enabled(watch) != 0
    guard !watchReconcileScheduled else { return }
    watchReconcileScheduled = true
    queue.async { self.reconcileWatches() }
  }

  /// Suspends or resumes sources whose watch changed state since the last turn.
  func reconcileWatches() {
    assertOnQueue()
    watchReconcileScheduled = false
    for (watch, entry) in watchSources where entry.wanted != entry.active {
      for source in entry.sources {
        if entry.wanted { source.resume() } else { source.suspend() }
      }
      for reader in entry.readers {
        if entry.wanted { reader.resume() } else { reader.suspend() }
      }
      watchSources[watch]!.active = entry.wanted
    }
  }

  private func removeWatch(_ watch: OpaquePointer) {
    assertOnQueue()
    guard let entry = watchSources.removeValue(forKey: watch) else { return }
    entry.cancel()
  }

  private func handleWatch(_ watchBits: UInt, _ flags: UInt32) {
    assertOnQueue()
    guard let watch = OpaquePointer(bitPattern: watchBits), watchSources[watch]?.wanted == true
    else {
      return
    }
    // Reading a message makes libdbus ask for a dispatch; it follows right here, so no round
    // is scheduled for it (that would wake a worker thread for each message, to find nothing).
    dispatchFollows = true
    _ = dbus_watch_handle(watch, flags)
    dispatchFollows = false
    dispatchMessages()
  }

  // MARK: Timeouts

  private func timeoutChanged(_ timeout: OpaquePointer) {
    assertOnQueue()
    timeoutSources.removeValue(forKey: timeout)?.cancel()
    guard dbus_timeout_get_enabled(timeout) != 0 else { return }
    let interval = max(Int(dbus_timeout_get_interval(timeout)), 0)
    let timeoutBits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(timeout)))
    let timer = DispatchSource.makeTimerSource(queue: queue)
    timer.schedule(
      deadline: .now() + .milliseconds(interval), repeating: .milliseconds(max(interval, 1)))
    timer.setEventHandler { [self] in
      guard let timeout = OpaquePointer(bitPattern: timeoutBits),
        self.timeoutSources[timeout] != nil
      else { return }
      _ = dbus_timeout_handle(timeout)
      self.dispatchMessages()
    }
    timer.resume()
    timeoutSources[timeout] = timer
  }

  private func removeTimeout(_ timeout: OpaquePointer) {
    assertOnQueue()
    timeoutSources.removeValue(forKey: timeout)?.cancel()
  }

  // MARK: Dispatching

  /// Schedules one round of dispatching on the queue (coalesced).
  func scheduleDispatch() {
    if !isOnQueue {
      queue.async { self.scheduleDispatch() }
      return
    }
    guard !dispatchScheduled, !dispatchFollows else { return }
    dispatchScheduled = true
    queue.async {
      self.dispatchScheduled = false
      self.dispatchMessages()
    }
  }

  /// Dispatches queued incoming messages; yields the queue after a batch so that sends and
  /// cancellations interleave with a flood of incoming messages.
  func dispatchMessages() {
    assertOnQueue()
    guard !isClosed else { return }
    var budget = 256
    while dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS {
      _ = dbus_connection_dispatch(raw)
      if isClosed { return }
      budget -= 1
      if budget == 0 {
        scheduleDispatch()
        return
      }
    }
  }

  /// The message filter: local Disconnected, signals for subscriptions, calls to our objects.
  func filter(_ message: OpaquePointer) -> DBusHandlerResult {
    assertOnQueue()
    switch dbus_message_get_type(message) {
    case DBusMessage.Kind.signal.rawValue:
      if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
        shutDown(reason: "lost the connection to the bus", lost: true, insideDispatch: true)
        return DBUS_HANDLER_RESULT_HANDLED
      }
      deliverSignal(message)
      return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    case DBusMessage.Kind.methodCall.rawValue:
      return handleMethodCall(message)
        ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    default:
      return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    }
  }
}

/// The one filter function (the same pointer must be given to add and remove).
private let messageFilter: DBusHandleMessageFunction = { _, message, data in
  DBusConnection.connection(data).filter(message!)
}

/// The DispatchSources and reading thread of one libdbus watch and whether they are resumed.
struct WatchSources {
  var sources: [any DispatchSourceProtocol]
  var readers: [ReadWatchThread] = []
  /// Whether the sources are resumed.
  var active: Bool
  /// Whether libdbus last said the watch is enabled.
  var wanted: Bool

  /// Cancels the sources; suspended ones are resumed after cancelling so GCD can release them.
  func cancel() {
    for source in sources {
      source.cancel()
      if !active { source.resume() }
    }
    for reader in readers { reader.cancel() }
  }
}

extension DBusConnection {
  /// How many libdbus watches and timeouts currently have Dispatch sources, and how many
  /// sources exist in all (for tests: nothing may pile up as watches toggle).
  var dispatchSourceCounts: (watches: Int, sources: Int, timeouts: Int) {
    (try? onQueueSync { () throws(DBusError) in
      (
        watchSources.count,
        watchSources.values.reduce(0) { $0 + $1.sources.count + $1.readers.count },
        timeoutSources.count
      )
    }) ?? (0, 0, 0)
  }
}
