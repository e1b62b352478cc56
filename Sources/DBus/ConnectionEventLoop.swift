// Bridging libdbus's main-loop hooks: watches -> the Reactor (its handler enters the queue),
// timeouts -> Dispatch timer sources, dispatch status and wakeup -> dispatching on the queue.
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
      { watch, data in DBusConnection.connection(data).addWatch(watch!) ? 1 : 0 },
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

  /// Added: the reactor watches a duplicate of the watch's descriptor, enabled only if the
  /// watch is; its handler enters the queue (`sync`: the block runs on the reactor's thread
  /// when the queue is idle, so a message is read with no thread hand-off) and runs libdbus's
  /// watch handler there. Toggled: the reactor's watch follows at the end of the queue turn.
  /// Removed: the watch is released and its duplicate closed. `false` when the reactor cannot
  /// watch it (libdbus then fails the connection).
  ///
  /// Each watch has a duplicate of its own: libdbus's read and write watches share one
  /// descriptor, which epoll takes once, and libdbus closes its descriptor right after
  /// removing the watch, when a handler the reactor took for a wake-up may still be on its way
  /// into the queue; that handler finds its watch gone (or holding another duplicate) there,
  /// before it touches a descriptor.
  private func addWatch(_ watch: OpaquePointer) -> Bool {
    assertOnQueue()
    removeWatch(watch)
    let fd = Syscall.fcntl(dbus_watch_get_unix_fd(watch), F_DUPFD_CLOEXEC, 0)
    guard fd >= 0 else { return false }
    let flags = dbus_watch_get_flags(watch)
    var interest = Reactor.Interest()
    if flags & DBUS_WATCH_READABLE.rawValue != 0 { interest.insert(.readable) }
    if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { interest.insert(.writable) }
    let watchBits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(watch)))
    let enabled = dbus_watch_get_enabled(watch) != 0
    // The handler holds the connection: an open connection keeps itself alive through its
    // watches, until `shutDown` (or libdbus) removes them.
    let watched = Reactor.shared.watch(fd, for: interest, enabled: enabled) {
      [self, queue] event in
      queue.sync { self.callerExecutor.turn { self.handleWatch(watchBits, fd, event) } }
    }
    guard watched else {
      Syscall.close(fd)
      return false
    }
    watchSources[watch] = WatchSources(fd: fd, active: enabled, wanted: enabled)
    return true
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
    // At the end of a turn when one runs (no worker thread woken for it), else a block of its
    // own.
    guard !callerExecutor.atEndOfTurn({ self.reconcileWatches() }) else { return }
    queue.async { self.reconcileWatches() }
  }

  /// Enables or disables the reactor's watches whose libdbus watch changed state since the
  /// last turn.
  func reconcileWatches() {
    assertOnQueue()
    watchReconcileScheduled = false
    for (watch, entry) in watchSources where entry.wanted != entry.active {
      Reactor.shared.enableWatch(entry.fd, entry.wanted)
      watchSources[watch]!.active = entry.wanted
    }
  }

  private func removeWatch(_ watch: OpaquePointer) {
    assertOnQueue()
    guard let entry = watchSources.removeValue(forKey: watch) else { return }
    entry.cancel()
  }

  /// The reactor's event for the watch at `watchBits` whose duplicate is `fd`, on the queue:
  /// nothing when the watch was removed (or replaced) or disabled since the reactor took it.
  private func handleWatch(_ watchBits: UInt, _ fd: Int32, _ event: Reactor.WatchEvent) {
    assertOnQueue()
    guard let watch = OpaquePointer(bitPattern: watchBits), let entry = watchSources[watch],
      entry.fd == fd, entry.wanted
    else {
      return
    }
    var flags = UInt32(0)
    if event.readable { flags |= DBUS_WATCH_READABLE.rawValue }
    if event.writable { flags |= DBUS_WATCH_WRITABLE.rawValue }
    if event.failed { flags |= DBUS_WATCH_HANGUP.rawValue | DBUS_WATCH_ERROR.rawValue }
    // A hang-up or error with nothing left to read: libdbus's read meets the end or the error
    // and it disconnects, but the descriptor stays ready, so the watch leaves the epoll set
    // until libdbus changes it (it removes it) instead of waking the reactor over and over.
    // While bytes remain, libdbus reads a part per call and is called again at once.
    var unread: Int32 = 0
    if event.failed, Syscall.ioctl(fd, UInt(FIONREAD), &unread) != 0 { unread = 0 }
    // Reading a message makes libdbus ask for a dispatch; it follows right here, so no round
    // is scheduled for it (that would wake a worker thread for each message, to find nothing).
    dispatchFollows = true
    _ = dbus_watch_handle(watch, flags)
    dispatchFollows = false
    if event.failed && unread == 0, let entry = watchSources[watch], entry.fd == fd,
      entry.active
    {
      Reactor.shared.enableWatch(fd, false)
      watchSources[watch]!.active = false
    }
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

/// The reactor's watch of one libdbus watch and whether it is enabled.
struct WatchSources {
  /// The duplicate of the watch's descriptor that the reactor watches (see `addWatch`).
  let fd: Int32
  /// Whether the reactor's watch is enabled.
  var active: Bool
  /// Whether libdbus last said the watch is enabled.
  var wanted: Bool

  /// Ends the reactor's watch and closes the duplicate (on the connection's queue).
  func cancel() {
    Reactor.shared.release(fd)
    Syscall.close(fd)
  }
}

extension DBusConnection {
  /// How many libdbus watches and timeouts currently have Dispatch sources, and how many
  /// sources exist in all (for tests: nothing may pile up as watches toggle).
  var dispatchSourceCounts: (watches: Int, sources: Int, timeouts: Int) {
    (try? onQueueSync { () throws(DBusError) in
      (
        watchSources.count,
        watchSources.count,
        timeoutSources.count
      )
    }) ?? (0, 0, 0)
  }
}
