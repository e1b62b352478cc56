// A thread of the connection's own that waits for its socket to become readable and then runs
// libdbus's watch handler on the connection's queue, entering it with `queue.sync`.
import CDBus
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Waits in `poll()` for a descriptor to become readable, then runs `handler` on `queue` with
/// `queue.sync`, which runs the block on this very thread when the queue is idle.
///
/// Why not a Dispatch read source: Dispatch hears of the event on its manager thread and then
/// wakes a worker thread to run the queue, two thread wake-ups before the first byte is read.
/// This thread is woken by the kernel and reads at once. It matters where a signal's latency
/// is measured (`blekit scan` printing a new peripheral) and costs one mostly sleeping thread
/// per connection.
///
/// Like a Dispatch source it starts disabled; ``resume()`` / ``suspend()`` follow libdbus's
/// enabled flag and ``cancel()`` ends the thread, which then closes the descriptor it owns.
final class ReadWatchThread: Sendable {
  private struct State {
    var enabled = false
    var cancelled = false
    /// The thread has ended and closed the wake pipe: nobody may write to its number again
    /// (it may already belong to another descriptor).
    var closed = false
  }

  private let fd: Int32
  /// A pipe that interrupts `poll()` when the state changes.
  private let wakeReader: Int32
  let wakeWriter: Int32
  private let state = Mutex(State())
  private let queue: DispatchQueue
  private let handler: @Sendable (_ flags: UInt32) -> Void

  /// Starts the thread, which owns `fd` from now on; `nil` (and `fd` left open) when no pipe
  /// or thread can be had.
  init?(fd: Int32, queue: DispatchQueue, handler: @escaping @Sendable (UInt32) -> Void) {
    var ends: [Int32] = [-1, -1]
    guard Syscall.pipe(&ends) == 0 else { return nil }
    for end in ends {
      _ = Syscall.fcntl(end, F_SETFD, FD_CLOEXEC)
      _ = Syscall.fcntl(end, F_SETFL, O_NONBLOCK)
    }
    self.fd = fd
    wakeReader = ends[0]
    wakeWriter = ends[1]
    self.queue = queue
    self.handler = handler
    guard Syscall.startDetachedThread({ self.run() }) == 0 else {
      Syscall.close(ends[0])
      Syscall.close(ends[1])
      return nil
    }
  }

  /// Starts waiting for input.
  func resume() { change { $0.enabled = true } }
  /// Stops waiting for input until ``resume()``.
  func suspend() { change { $0.enabled = false } }
  /// Ends the thread; it closes its descriptors on the way out.
  func cancel() { change { $0.cancelled = true } }

  /// Whether the thread has ended and closed its descriptors (for tests).
  var isClosed: Bool { state.withLock { $0.closed } }

  /// Changes the state and wakes the thread. The wake-up is written under the lock, so it
  /// cannot reach the pipe's number after the thread closed it (the pipe is non-blocking: a
  /// full pipe already holds a wake-up).
  private func change(_ update: (inout State) -> Void) {
    state.withLock { state in
      update(&state)
      guard !state.closed else { return }
      var byte: UInt8 = 1
      _ = Syscall.write(wakeWriter, &byte, 1)
    }
  }

  private func run() {
    defer {
      Syscall.close(fd)
      state.withLock { state in
        state.closed = true
        Syscall.close(wakeReader)
        Syscall.close(wakeWriter)
      }
    }
    var drain = [UInt8](repeating: 0, count: 64)
    /// Set after a hang-up or error was handed to libdbus with nothing left to read (so its
    /// read met the end or the error and it disconnects): the descriptor stays ready, so it is
    /// left out of `poll` until libdbus changes the watch (it removes it, which cancels this
    /// thread), instead of spinning on it. While bytes remain, libdbus reads a part per call
    /// and is called again at once.
    var parked = false
    while true {
      let now = state.withLock { $0 }
      if now.cancelled { return }
      var fds = [pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0)]
      if now.enabled && !parked { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
      if Syscall.poll(&fds, nfds_t(fds.count), -1) < 0 {
        if errno == EINTR { continue }
        return
      }
      if fds[0].revents != 0 {
        _ = Syscall.read(wakeReader, &drain, drain.count)
        parked = false
        continue
      }
      guard fds.count == 2, fds[1].revents != 0 else { continue }
      var flags = DBUS_WATCH_READABLE.rawValue
      if fds[1].revents & Int16(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
      if fds[1].revents & Int16(POLLERR) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
      let hungUp = flags != DBUS_WATCH_READABLE.rawValue
      var unread: Int32 = 0
      if hungUp, Syscall.ioctl(fd, UInt(FIONREAD), &unread) != 0 { unread = 0 }
      queue.sync { handler(flags) }
      if hungUp && unread == 0 { parked = true }
    }
  }
}
