// Owning and watching bus names: RequestName, ReleaseName, GetNameOwner, NameOwnerChanged.

/// Flags for `requestName` (`DBUS_NAME_FLAG_*`).
public struct RequestNameFlags: OptionSet, Sendable, Hashable {
  public let rawValue: UInt32
  public init(rawValue: UInt32) { self.rawValue = rawValue }
  /// Let another connection take the name over with `.replaceExisting`.
  public static let allowReplacement = RequestNameFlags(rawValue: 0x1)
  /// Take the name from its owner if that owner allowed replacement.
  public static let replaceExisting = RequestNameFlags(rawValue: 0x2)
  /// Fail instead of waiting in the queue for the name.
  public static let doNotQueue = RequestNameFlags(rawValue: 0x4)
}

/// The bus's answer to `requestName` (`DBUS_REQUEST_NAME_REPLY_*`).
public enum RequestNameReply: UInt32, Sendable {
  /// This connection now owns the name.
  case primaryOwner = 1
  /// Another connection owns it; this one is queued.
  case inQueue = 2
  /// Another connection owns it and `.doNotQueue` was given.
  case exists = 3
  /// This connection already owned it.
  case alreadyOwner = 4
}

extension DBusConnection {
  /// Asks the bus for a well-known name. The corresponding D-Bus member is
  /// `org.freedesktop.DBus.RequestName`.
  public func requestName(_ name: BusName, flags: RequestNameFlags = []) async throws(DBusError)
    -> RequestNameReply
  {
    guard !name.isUnique else { throw DBusError.invalid("cannot request a unique name: \(name)") }
    let reply = try await callBus("RequestName", [.string(name.rawValue), .uint32(flags.rawValue)])
    guard reply.count == 1, let code = reply[0].uint32Value,
      let answer = RequestNameReply(rawValue: code)
    else {
      throw DBusError(code: .unexpectedReply, message: "RequestName replied \(reply)")
    }
    return answer
  }

  /// Gives a well-known name back. The corresponding D-Bus member is
  /// `org.freedesktop.DBus.ReleaseName`.
  public func releaseName(_ name: BusName) async throws(DBusError) {
    let reply = try await callBus("ReleaseName", [.string(name.rawValue)])
    guard reply.count == 1, let code = reply[0].uint32Value else {
      throw DBusError(code: .unexpectedReply, message: "ReleaseName replied \(reply)")
    }
    // 1 released, 2 non-existent, 3 not owner.
    if code == 3 {
      throw DBusError(
        code: .remote, name: "org.freedesktop.DBus.Error.NotOwner",
        message: "\(uniqueName) does not own \(name)")
    }
  }

  /// Waits for the bus daemon to answer a ping: returns when it does, throws
  /// ``DBusError/Code/disconnected`` when the connection is lost meanwhile (or was), and
  /// ``DBusError/Code/timeout`` after `timeout`.
  ///
  /// A daemon that is shutting down answers nothing more, and closes every connection one by
  /// one: others may hear a client leave (NameOwnerChanged) just before losing the bus
  /// themselves. A ping tells the two apart. The corresponding D-Bus member is
  /// `org.freedesktop.DBus.Peer.Ping`, sent to the bus.
  public func pingBus(timeout: Duration = .seconds(5)) async throws(DBusError) {
    _ = try await call(
      destination: .bus, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus.Peer",
      member: "Ping", timeout: timeout)
  }

  /// The current owner (unique name) of `name`, or nil if nobody owns it. The corresponding
  /// D-Bus member is `org.freedesktop.DBus.GetNameOwner`.
  public func nameOwner(_ name: BusName) async throws(DBusError) -> BusName? {
    if name.isUnique || name == .bus {
      let has = try await callBus("NameHasOwner", [.string(name.rawValue)])
      return has.first?.boolValue == true ? name : nil
    }
    do throws(DBusError) {
      let reply = try await callBus("GetNameOwner", [.string(name.rawValue)])
      guard let owner = reply.first?.stringValue, let bus = BusName(rawValue: owner) else {
        throw DBusError(code: .unexpectedReply, message: "GetNameOwner replied \(reply)")
      }
      return bus
    } catch {
      if error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" { return nil }
      throw error
    }
  }

  /// The process ID of the connection that owns `name` (for `org.bluez`: bluetoothd's pid).
  /// The corresponding D-Bus member is `org.freedesktop.DBus.GetConnectionUnixProcessID`.
  ///
  /// - Throws: `org.freedesktop.DBus.Error.NameHasNoOwner` when nobody owns `name`.
  public func processID(of name: BusName) async throws(DBusError) -> UInt32 {
    let reply = try await callBus("GetConnectionUnixProcessID", [.string(name.rawValue)])
    guard reply.count == 1, let pid = reply[0].uint32Value else {
      throw DBusError(
        code: .unexpectedReply, message: "GetConnectionUnixProcessID replied \(reply)")
    }
    return pid
  }

  /// NameOwnerChanged for one name, as a stream of new owners (nil = the name is gone).
  /// Dropping or cancelling the stream removes the match rule; the stream throws
  /// ``DBusError/Code/disconnected`` when the connection to the bus is lost.
  public func nameOwnerChanges(_ name: BusName) async throws(DBusError)
    -> SubscriptionStream<BusName?>
  {
    try await subscriptionStream(.nameOwnerChanged(name)) { signal -> BusName?? in
      NameOwnerChange(signal).map { $0.newOwner }
    }
  }
}

/// A decoded `org.freedesktop.DBus.NameOwnerChanged` signal.
public struct NameOwnerChange: Sendable, Hashable {
  /// The name whose owner changed.
  public var name: BusName
  /// The owner before (nil: nobody).
  public var oldOwner: BusName?
  /// The owner now (nil: the name is gone).
  public var newOwner: BusName?

  /// Decodes the signal's `sss` arguments; `nil` for any other signal.
  public init?(_ signal: Signal) {
    guard signal.interface == .bus, signal.member == "NameOwnerChanged",
      signal.arguments.count == 3, let name = signal.arguments[0].stringValue,
      let old = signal.arguments[1].stringValue, let new = signal.arguments[2].stringValue
    else { return nil }
    self.name = BusName(unchecked: name)
    oldOwner = old.isEmpty ? nil : BusName(unchecked: old)
    newOwner = new.isEmpty ? nil : BusName(unchecked: new)
  }
}

extension MatchRule {
  /// NameOwnerChanged from the bus for one name.
  public static func nameOwnerChanged(_ name: BusName) -> MatchRule {
    MatchRule(
      sender: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: "NameOwnerChanged",
      arg0: name.rawValue)
  }
}
