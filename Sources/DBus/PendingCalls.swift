// Method calls in flight: DBusPendingCall notify -> CheckedContinuation, with cancellation.
import CDBus
import Dispatch

/// A call waiting for its reply. Queue-confined (stored in `DBusConnection.pendingCalls`).
struct PendingCall {
  let pending: OpaquePointer
  let continuation: UnsafeContinuation<Result<[DBusValue], DBusError>, Never>
  let what: CallLabel
  let timeout: Duration
  /// When the call times out; nil for no timeout.
  let deadline: DispatchTime?
}

/// The user data of a pending call's notify function: which connection and which call.
private final class PendingContext {
  let connection: DBusConnection
  let id: UInt64
  init(connection: DBusConnection, id: UInt64) {
    self.connection = connection
    self.id = id
  }
}

extension DBusConnection {
  func startCall(
    id: UInt64, message: DBusMessage, timeoutMS: Int32, timeout: Duration, what: CallLabel,
    continuation: UnsafeContinuation<Result<[DBusValue], DBusError>, Never>
  ) {
    assertOnQueue()
    if isClosed {
      continuation.resume(returning: .failure(.disconnectedError()))
      return
    }
    if cancelledCalls.remove(id) != nil {
      continuation.resume(
        returning: .failure(DBusError(code: .cancelled, message: "\(what) was cancelled")))
      return
    }
    // libdbus would create (and we'd bridge) one timeout source per call; one shared timer is
    // far cheaper, so libdbus is told "infinite" and deadlines are kept here.
    var pending: OpaquePointer?
    let infinite = blekit_timeout_infinite()
    let deadline: DispatchTime? =
      timeoutMS == infinite ? nil : .now() + .milliseconds(Int(timeoutMS))
    guard dbus_connection_send_with_reply(raw, message.raw, &pending, infinite) != 0 else {
      continuation.resume(returning: .failure(.noMemoryError))
      return
    }
    guard let pending else {
      continuation.resume(returning: .failure(.disconnectedError()))
      return
    }
    pendingCalls[id] = PendingCall(
      pending: pending, continuation: continuation, what: what, timeout: timeout,
      deadline: deadline)
    if let deadline { armCallTimer(for: deadline) }
    let context = Unmanaged.passRetained(PendingContext(connection: self, id: id)).toOpaque()
    let notify: DBusPendingCallNotifyFunction = { _, data in
      guard let data else { return }
      let context = Unmanaged<PendingContext>.fromOpaque(data).takeUnretainedValue()
      context.connection.completeCall(id: context.id)
    }
    let free: DBusFreeFunction = { data in
      guard let data else { return }
      Unmanaged<PendingContext>.fromOpaque(data).release()
    }
    guard dbus_pending_call_set_notify(pending, notify, context, free) != 0 else {
      Unmanaged<PendingContext>.fromOpaque(context).release()
      pendingCalls[id] = nil
      dbus_pending_call_cancel(pending)
      dbus_pending_call_unref(pending)
      continuation.resume(returning: .failure(.noMemoryError))
      return
    }
    if dbus_pending_call_get_completed(pending) != 0 { completeCall(id: id) }
  }

  /// Makes sure the shared call timer fires no later than `deadline`.
  private func armCallTimer(for deadline: DispatchTime) {
    if let current = callTimerDeadline, current <= deadline { return }
    let timer: any DispatchSourceTimer
    if let existing = callTimer {
      timer = existing
    } else {
      timer = DispatchSource.makeTimerSource(queue: queue)
      timer.setEventHandler { [self] in self.expireCalls() }
      timer.schedule(deadline: .distantFuture)
      timer.resume()
      callTimer = timer
    }
    callTimerDeadline = deadline
    timer.schedule(deadline: deadline, leeway: .milliseconds(1))
  }

  /// Fails every call whose deadline passed with `.timeout`, then re-arms for the next one.
  private func expireCalls() {
    assertOnQueue()
    callTimerDeadline = nil
    let now = DispatchTime.now()
    var next: DispatchTime?
    for (id, call) in pendingCalls {
      guard let deadline = call.deadline else { continue }
      if deadline <= now {
        pendingCalls[id] = nil
        dbus_pending_call_cancel(call.pending)
        dbus_pending_call_unref(call.pending)
        call.continuation.resume(
          returning: .failure(
            DBusError(
              code: .timeout,
              message: "timed out after \(Self.describe(call.timeout)) calling \(call.what)")))
      } else if next == nil || deadline < next! {
        next = deadline
      }
    }
    if let next {
      armCallTimer(for: next)
    } else {
      callTimer?.schedule(deadline: .distantFuture)
    }
  }

  func cancelCall(id: UInt64) {
    assertOnQueue()
    guard let call = pendingCalls.removeValue(forKey: id) else {
      // Not started yet (or already finished): make sure it never starts.
      if !isClosed { cancelledCalls.insert(id) }
      return
    }
    dbus_pending_call_cancel(call.pending)
    dbus_pending_call_unref(call.pending)
    call.continuation.resume(
      returning: .failure(DBusError(code: .cancelled, message: "\(call.what) was cancelled")))
  }

  func completeCall(id: UInt64) {
    assertOnQueue()
    guard let call = pendingCalls.removeValue(forKey: id) else { return }
    let reply = dbus_pending_call_steal_reply(call.pending)
    dbus_pending_call_unref(call.pending)
    guard let reply else {
      call.continuation.resume(
        returning: .failure(DBusError(code: .noReply, message: "no reply to \(call.what)")))
      return
    }
    let message = DBusMessage(adopting: reply)
    call.continuation.resume(returning: interpretReply(message, call: call))
  }

  private func interpretReply(_ message: DBusMessage, call: PendingCall) -> Result<
    [DBusValue], DBusError
  > {
    switch message.kind {
    case .methodReturn:
      do throws(DBusError) {
        return .success(try message.arguments())
      } catch {
        return .failure(
          DBusError(code: .unexpectedReply, message: "\(call.what): \(error.message)"))
      }
    case .error:
      let name = message.errorName ?? "org.freedesktop.DBus.Error.Failed"
      let text = (try? message.arguments())?.first?.stringValue ?? ""
      if name == "org.freedesktop.DBus.Error.NoReply" && message.sender == nil {
        // Made up locally by libdbus: the timeout fired, or the connection went away.
        if isClosed || dbus_connection_get_is_connected(raw) == 0 {
          return .failure(.disconnectedError("connection lost while calling \(call.what)"))
        }
        return .failure(
          DBusError(
            code: .timeout,
            message: "timed out after \(Self.describe(call.timeout)) calling \(call.what)"))
      }
      if name == "org.freedesktop.DBus.Error.Disconnected" && message.sender == nil {
        return .failure(.disconnectedError("connection lost while calling \(call.what)"))
      }
      if name == "org.freedesktop.DBus.Error.NoReply" {
        return .failure(DBusError(code: .noReply, name: name, message: text))
      }
      return .failure(DBusError(code: .remote, name: name, message: text))
    default:
      return .failure(
        DBusError(code: .unexpectedReply, message: "\(call.what): reply of unexpected kind"))
    }
  }

  static func describe(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    if attoseconds == 0 { return "\(seconds) s" }
    let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    return "\(ms) ms"
  }
}
