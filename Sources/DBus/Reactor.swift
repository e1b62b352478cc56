// Reactor: the one thread of the process that waits on file descriptors (epoll), resumes the tasks
// that wait for a descriptor to become readable or writable, and runs the readers that watch one.
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One `epoll(7)` instance on one thread of its own, serving every descriptor the process waits
/// on: the D-Bus connections' sockets, and BLEKit's notification, L2CAP and command descriptors
/// (after swift-nio's event loop: one owner per descriptor; nothing else blocks on one).
///
/// Callers keep their descriptors non-blocking (`O_NONBLOCK`) and make their system calls
/// themselves; when one answers `EAGAIN` they ``arm(_:for:until:)`` a wait and await it
/// (``ReactorWait/value()``). The descriptor stays in the epoll set between waits, armed only
/// while someone waits (`EPOLLONESHOT`): a readiness nobody asked for wakes no thread.
///
/// - Level-triggered: arming a descriptor that is ready already reports it at once, so a
///   caller that arms after its `EAGAIN` loses no wake-up. A wake may still be spurious (two
///   waiters, one read): callers retry their call and arm again on `EAGAIN`.
/// - Cancellation: cancelling the task that awaits a wait ends it with `CancellationError`
///   and disarms it.
/// - Deadlines: a wait armed with a deadline ends with ``ReactorWait/Wake/timedOut`` then.
/// - Closing: the owner of a descriptor calls ``release(_:)`` before `close(2)`: waits still
///   pending end with ``ReactorWait/Wake/released`` and the descriptor leaves the epoll set,
///   so no wait can outlive its descriptor (and be woken by another one that reuses its
///   number).
///
/// A descriptor that is read for as long as it is open (a D-Bus connection's socket, an
/// AcquireNotify socket) is ``watch(_:for:enabled:onEvent:)``ed instead: level-triggered and
/// not disarmed by an event, its handler runs on the reactor's thread each time it is ready
/// and reads it there, so a message or value costs no thread hand-off before it is read
/// (swift-nio's model: the loop that owns the descriptor reads it).
///
/// The reactor's thread resumes continuations and runs the package's own watch handlers,
/// outside its lock. A handler may enter a D-Bus connection's queue (`sync`), whose turns are
/// short and never wait for the reactor; an exported method's handler starts there and runs
/// until its first suspension (``ExportedMethod``), and code that prefers the connection's
/// executor (``DBusConnection/executor``) resumes there at the end of the turn that read its
/// reply. No other code runs on it.
///
/// Package access (not public: no public API deals in descriptors), so that the DBus and BLEKit
/// modules and the blekit command (serve's child processes, the pairing prompt's standard
/// input) wait on this one thread.
package final class Reactor: Sendable {
  /// The process's reactor.
  package static let shared = Reactor()

  /// What a wait asks for.
  package struct Interest: OptionSet, Sendable, Hashable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    package static let readable = Interest(rawValue: Syscall.epollIn)
    package static let writable = Interest(rawValue: Syscall.epollOut)
  }

  /// What woke a watched descriptor.
  package struct WatchEvent: Sendable {
    /// Input is waiting (or the end of the stream: a read answers 0).
    package let readable: Bool
    /// Room to write.
    package let writable: Bool
    /// An error or hang-up was reported; without `readable`, a read may only answer `EAGAIN`,
    /// and the handler must end the watch rather than be called again at once.
    package let failed: Bool
  }

  private struct Registration {
    var waits: [ReactorWait] = []
    /// Whether the descriptor is in the epoll set (armed or not).
    var inSet = false
    /// The handler of a watched descriptor (which takes no waits).
    var watch: (@Sendable (WatchEvent) -> Void)?
    /// What a watch waits for.
    var watchInterest = Interest()
  }

  /// The registrations, indexed by descriptor number (the kernel hands out the lowest free
  /// number, so the table stays as small as the process's busiest moment): a wake-up finds its
  /// descriptor's registration without hashing, which cost about 100 instructions per value
  /// on a slow link (callgrind, `scripts/bench-receive --interval 20`).
  private struct Registrations {
    private var slots: [Registration?] = []
    /// The handler of each watch in the epoll set, beside its registration: what a wake-up
    /// reads (an optional registration read from its slot was copied whole, with a retain and
    /// a release of each of its references). Held in a struct: a function stored in an array
    /// as it is was read out through a thunk made (allocated) at each read.
    private var activeWatches: [WatchHandler?] = []

    subscript(fd: Int32) -> Registration? {
      get { fd >= 0 && Int(fd) < slots.count ? slots[Int(fd)] : nil }
      set {
        guard fd >= 0 else { return }
        if Int(fd) >= slots.count {
          guard newValue != nil else { return }
          let added = Int(fd) - slots.count + 1
          slots.append(contentsOf: repeatElement(nil, count: added))
          activeWatches.append(contentsOf: repeatElement(nil, count: added))
        }
        slots[Int(fd)] = newValue
        activeWatches[Int(fd)] =
          newValue?.inSet == true ? newValue?.watch.map(WatchHandler.init) : nil
      }
    }

    /// Takes `fd`'s registration out.
    mutating func removeValue(forKey fd: Int32) -> Registration? {
      guard let registration = self[fd] else { return nil }
      self[fd] = nil
      return registration
    }

    /// The watch handler of `fd`, if it is watched and in the epoll set.
    func activeWatch(_ fd: Int32) -> WatchHandler? {
      fd >= 0 && Int(fd) < activeWatches.count ? activeWatches[Int(fd)] : nil
    }

    /// Every descriptor with its registration.
    var all: some Sequence<(fd: Int32, registration: Registration)> {
      slots.indices.lazy.compactMap { index in
        self.slots[index].map { (Int32(index), $0) }
      }
    }
  }

  private struct State {
    var registrations = Registrations()
    /// How many armed waits have a deadline: while none has, a wake-up looks for none (the
    /// bus connections' watches and most waits have none).
    var deadlines = 0

    /// Counts out the waits with a deadline among `waits`, which leave.
    mutating func leaving(_ waits: some Sequence<ReactorWait>) {
      for wait in waits where wait.deadline != nil { deadlines -= 1 }
    }
  }

  private let epoll: Int32
  /// An eventfd in the set, written when a wait with a deadline is armed, so that the thread
  /// recomputes how long it may sleep.
  private let wakeup: Int32
  private let state = Mutex(State())
  /// The reactor's thread, once it runs (0 before).
  private let thread = Atomic<UInt>(0)

  /// Whether the caller runs on the reactor's thread (a watch's handler, or code resumed in a
  /// D-Bus connection's turn: ``DBusConnection/executor``).
  package var isCurrentThread: Bool {
    thread.load(ordering: .acquiring) == UInt(Syscall.currentThread())
  }

  /// How many events one `epoll_wait` takes at most.
  private static let eventBatch = 64

  /// A reactor of its own, with its own thread, which lives as long as the process: the
  /// process uses ``shared``; a test makes one to count its own waits alone.
  package init() {
    epoll = Syscall.epollCreate()
    wakeup = Syscall.eventfd()
    guard epoll >= 0, wakeup >= 0 else { return }
    _ = Syscall.epollControl(epoll, Syscall.epollAdd, wakeup, Syscall.epollIn)
    _ = Syscall.startDetachedThread { self.run() }
  }

  /// Arms a wait for `fd` to be ready for `interest`, ending at `deadline` if it has one. Call
  /// it right after the system call that answered `EAGAIN`, under whatever lock keeps the
  /// descriptor open meanwhile (the reactor takes only its own lock, which it never holds
  /// while calling out).
  ///
  /// A descriptor epoll cannot watch (a regular file: `EPERM`) is always ready; one that is
  /// not open (`EBADF`), or a reactor whose epoll could not be made, ends the wait as
  /// released.
  package func arm(
    _ fd: Int32, for interest: Interest, until deadline: ContinuousClock.Instant? = nil
  ) -> ReactorWait {
    let wait = ReactorWait(fd: fd, interest: interest, deadline: deadline, reactor: self)
    let refused: ReactorWait.Wake? = state.withLock { state in
      guard epoll >= 0 else { return .released }
      var registration = state.registrations[fd] ?? Registration()
      guard registration.watch == nil else { return .released }
      registration.waits.append(wait)
      if let errno = update(fd, &registration) {
        registration.waits.removeLast()
        state.registrations[fd] = registration
        return errno == EPERM ? .ready : .released
      }
      state.registrations[fd] = registration
      if deadline != nil { state.deadlines += 1 }
      return nil
    }
    if let refused {
      wait.complete(refused)
    } else if deadline != nil {
      Syscall.eventfdSignal(wakeup)
    }
    return wait
  }

  /// Waits until `fd` is ready for `interest` (or `deadline` passes): ``arm(_:for:until:)``
  /// and ``ReactorWait/value()`` in one, for callers that hold no lock around the descriptor.
  /// Ends `.ready`, `.timedOut` or `.released`; a cancelled task disarms the wait and gets
  /// `CancellationError`.
  package func wait(
    _ fd: Int32, for interest: Interest, until deadline: ContinuousClock.Instant? = nil
  ) async throws -> ReactorWait.Wake {
    try await arm(fd, for: interest, until: deadline).value()
  }

  /// Watches `fd` until ``release(_:)``: `onEvent` runs on the reactor's thread, one call at a
  /// time, whenever `fd` is ready for `interest` or reports an error or hang-up
  /// (level-triggered: a handler that leaves input unread is called again), while the watch is
  /// enabled (``enableWatch(_:_:)``; a disabled watch is out of the epoll set, which reports
  /// errors and hang-ups even for no interest). `false` when the descriptor cannot be watched
  /// (no epoll, already watched or waited on, or refused by `epoll_ctl`).
  ///
  /// To close a watched descriptor safely, its owner ends the watch from the handler itself
  /// (``release(_:)``, then `close(2)`; a `shutdown(2)` from elsewhere wakes it with a
  /// hang-up), or from elsewhere with a handler that, should the reactor have taken it for a
  /// wake-up already, checks under its owner's lock that the watch is still its own before it
  /// touches the descriptor: a handler the reactor has taken runs once more even after the
  /// release.
  package func watch(
    _ fd: Int32, for interest: Interest = .readable, enabled: Bool = true,
    onEvent: @escaping @Sendable (WatchEvent) -> Void
  ) -> Bool {
    state.withLock { state in
      guard epoll >= 0, state.registrations[fd] == nil else { return false }
      var registration = Registration(watch: onEvent, watchInterest: interest)
      if enabled {
        guard Syscall.epollControl(epoll, Syscall.epollAdd, fd, interest.rawValue) == 0 else {
          return false
        }
        registration.inSet = true
      }
      state.registrations[fd] = registration
      return true
    }
  }

  /// Enables or disables the watch on `fd` (adding it to the epoll set or taking it out);
  /// nothing when `fd` is not watched or already in that state.
  package func enableWatch(_ fd: Int32, _ enabled: Bool) {
    state.withLock { state in
      guard var registration = state.registrations[fd], registration.watch != nil,
        registration.inSet != enabled
      else { return }
      let done =
        enabled
        ? Syscall.epollControl(epoll, Syscall.epollAdd, fd, registration.watchInterest.rawValue)
        : Syscall.epollControl(epoll, Syscall.epollDelete, fd, 0)
      if done == 0 || (!enabled && errno == ENOENT) { registration.inSet = enabled }
      state.registrations[fd] = registration
    }
  }

  /// Ends every wait on `fd` as released (or its watch) and takes it out of the epoll set.
  /// Call it before closing `fd`.
  package func release(_ fd: Int32) {
    let waits: [ReactorWait] = state.withLock { state in
      guard let registration = state.registrations.removeValue(forKey: fd) else { return [] }
      if registration.inSet { _ = Syscall.epollControl(epoll, Syscall.epollDelete, fd, 0) }
      state.leaving(registration.waits)
      return registration.waits
    }
    for wait in waits { wait.complete(.released) }
  }

  /// Takes a cancelled wait out (its task was cancelled) and ends it.
  func cancel(_ wait: ReactorWait) {
    state.withLock { state in
      guard var registration = state.registrations[wait.fd],
        let index = registration.waits.firstIndex(where: { $0 === wait })
      else { return }
      state.leaving([registration.waits.remove(at: index)])
      _ = update(wait.fd, &registration)
      state.registrations[wait.fd] = registration
    }
    wait.complete(.cancelled)
  }

  /// How many armed waits have a deadline (for tests).
  package var armedDeadlines: Int { state.withLock { $0.deadlines } }

  /// How many waits are armed on `fd` (for tests).
  package func pendingWaits(on fd: Int32) -> Int {
    state.withLock { $0.registrations[fd]?.waits.count ?? 0 }
  }

  /// Arms `fd` in the epoll set for what its waits ask (adding it on first use), or disarms it
  /// when none is left; the errno of a refusal. Runs under the lock.
  private func update(_ fd: Int32, _ registration: inout Registration) -> Int32? {
    let events =
      registration.waits.reduce(Interest()) { $0.union($1.interest) }.rawValue
      | Syscall.epollOneShot
    if registration.inSet {
      if Syscall.epollControl(epoll, Syscall.epollModify, fd, events) == 0 { return nil }
      // The descriptor was closed without release (the kernel dropped it): add it anew.
      guard errno == ENOENT else { return errno }
      registration.inSet = false
    }
    guard !registration.waits.isEmpty else { return nil }
    if Syscall.epollControl(epoll, Syscall.epollAdd, fd, events) != 0 {
      guard errno == EEXIST else { return errno }
      if Syscall.epollControl(epoll, Syscall.epollModify, fd, events) != 0 { return errno }
    }
    registration.inSet = true
    return nil
  }

  /// The reactor's thread: sleeps in `epoll_wait` until an event or the nearest deadline,
  /// then ends the waits that are due and runs the watches that woke, outside the lock.
  private func run() {
    thread.store(UInt(Syscall.currentThread()), ordering: .releasing)
    var events = [Syscall.EpollEvent](repeating: Syscall.EpollEvent(), count: Self.eventBatch)
    // Kept between wake-ups with their capacity: a wake-up allocates nothing for them.
    var woken: [Woken] = []
    woken.reserveCapacity(Self.eventBatch)
    // How long the next `epoll_wait` may sleep, computed at the end of each wake-up's turn
    // of the lock (one turn per wake-up, not two): a wait armed with a deadline after that
    // turn writes the eventfd, which ends the sleep at once.
    var timeout = state.withLock { Self.timeout($0) }
    while true {
      let count = events.withUnsafeMutableBufferPointer {
        Syscall.epollWait(epoll, $0.baseAddress!, Int32($0.count), timeout)
      }
      var due: [(ReactorWait, ReactorWait.Wake)] = []
      timeout = state.withLock { state in
        for event in events.prefix(max(0, Int(count))) {
          let fd = event.data.fd
          if fd == wakeup {
            Syscall.eventfdDrain(wakeup)
            continue
          }
          // Read in place: a watch's wake-up (every value on a slow link) copies no
          // registration out of the table and back.
          if let watch = state.registrations.activeWatch(fd) {
            let failed = event.events & (Syscall.epollError | Syscall.epollHangUp) != 0
            let event = WatchEvent(
              readable: event.events & Syscall.epollIn != 0,
              writable: event.events & Syscall.epollOut != 0, failed: failed)
            woken.append(Woken(handler: watch, event: event))
            continue
          }
          guard var registration = state.registrations[fd], registration.watch == nil else {
            continue
          }
          // The event disarmed the descriptor (one-shot): end what it answers, re-arm the rest.
          var ready = Interest(rawValue: event.events & (Syscall.epollIn | Syscall.epollOut))
          if event.events & (Syscall.epollError | Syscall.epollHangUp) != 0 {
            ready = [.readable, .writable]
          }
          registration.waits.removeAll { wait in
            guard !wait.interest.isDisjoint(with: ready) else { return false }
            due.append((wait, .ready))
            if wait.deadline != nil { state.deadlines -= 1 }
            return true
          }
          _ = update(fd, &registration)
          state.registrations[fd] = registration
        }
        guard state.deadlines > 0 else { return -1 }
        let now = ContinuousClock.now
        for (fd, var registration) in state.registrations.all
        where registration.waits.contains(where: { $0.deadline.map { $0 <= now } ?? false }) {
          registration.waits.removeAll { wait in
            guard let deadline = wait.deadline, deadline <= now else { return false }
            due.append((wait, .timedOut))
            state.deadlines -= 1
            return true
          }
          _ = update(fd, &registration)
          state.registrations[fd] = registration
        }
        return Self.timeout(state)
      }
      for (wait, wake) in due { wait.complete(wake) }
      for next in woken { next.handler.call(next.event) }
      // Emptied from the end, keeping its capacity: `removeAll(keepingCapacity:)` went
      // through the standard library's general range replacement, about 160 instructions per
      // wake-up (callgrind, `scripts/bench-receive --interval 20`), against a few here.
      while woken.popLast() != nil {}
    }
  }

  /// A watch's handler and the event it is called with, collected under the lock and called
  /// after it. A struct, not a tuple: an array of tuples was emptied through the runtime's
  /// generic tuple destructor, a few hundred instructions per wake-up (callgrind).
  private struct Woken {
    let handler: WatchHandler
    let event: WatchEvent
  }

  /// A watch's handler, wrapped for the tables it is kept in.
  private struct WatchHandler {
    let call: @Sendable (WatchEvent) -> Void
  }

  private static func nearestDeadline(_ state: State) -> ContinuousClock.Instant? {
    var nearest: ContinuousClock.Instant?
    for (_, registration) in state.registrations.all {
      for wait in registration.waits {
        if let deadline = wait.deadline, nearest.map({ deadline < $0 }) ?? true {
          nearest = deadline
        }
      }
    }
    return nearest
  }

  /// How long the reactor may sleep: until the nearest deadline, or -1 when no wait has one.
  private static func timeout(_ state: State) -> Int32 {
    state.deadlines == 0 ? -1 : timeout(until: nearestDeadline(state))
  }

  /// `epoll_wait`'s timeout in milliseconds, rounded up (a wake before the deadline would only
  /// sleep again): -1 without a deadline.
  private static func timeout(until deadline: ContinuousClock.Instant?) -> Int32 {
    guard let deadline else { return -1 }
    let left = ContinuousClock.now.duration(to: deadline)
    guard left > .zero else { return 0 }
    let (seconds, attoseconds) = left.components
    let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return Int32(clamping: milliseconds)
  }
}
