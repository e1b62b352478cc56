// Receiving signals: match rules, the Signal value, and SignalStream (an AsyncSequence that
// removes its match rule when it ends).
import CDBus

/// A bus match rule for signals (`type='signal',sender=...,path=...`).
public struct MatchRule: Sendable, Hashable, CustomStringConvertible {
  /// The message type matched; always `signal` here.
  public let type = "signal"
  public var sender: BusName?
  public var path: ObjectPath?
  public var pathNamespace: ObjectPath?
  public var interface: InterfaceName?
  public var member: MemberName?
  /// The first argument, which must be a string equal to this.
  public var arg0: String?

  public init(
    sender: BusName? = nil, path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil,
    interface: InterfaceName? = nil, member: MemberName? = nil, arg0: String? = nil
  ) {
    self.sender = sender
    self.path = path
    self.pathNamespace = pathNamespace
    self.interface = interface
    self.member = member
    self.arg0 = arg0
  }

  /// The rule in the bus's syntax, values quoted (a `'` in a value becomes `'\''`).
  public var ruleString: String {
    var parts = ["type='signal'"]
    func add(_ key: String, _ value: String?) {
      guard let value else { return }
      parts.append("\(key)='\(value.replacing("'", with: "'\\''"))'")
    }
    add("sender", sender?.rawValue)
    add("path", path?.rawValue)
    add("path_namespace", pathNamespace?.rawValue)
    add("interface", interface?.rawValue)
    add("member", member?.rawValue)
    add("arg0", arg0)
    return parts.joined(separator: ",")
  }

  public var description: String { ruleString }

  /// Local check of the header fields (the bus already filtered; several subscriptions share a
  /// connection, so each signal is matched again here). A well-known `sender` is checked
  /// against the owner the connection tracks for it; while it has none (not yet known, or the
  /// name is not owned), nothing matches: another client cannot pass for it.
  func matchesHeader(
    sender messageSender: String?, senderOwner: String?, path messagePath: String,
    interface messageInterface: String, member messageMember: String
  ) -> Bool {
    if let sender {
      if sender.isUnique || sender == .bus {
        guard messageSender == sender.rawValue else { return false }
      } else {
        guard let senderOwner, messageSender == senderOwner else { return false }
      }
    }
    if let path, path.rawValue != messagePath { return false }
    if let pathNamespace, pathNamespace.rawValue != "/" {
      let ns = pathNamespace.rawValue
      guard messagePath == ns || messagePath.hasPrefix(ns + "/") else { return false }
    }
    if let interface, interface.rawValue != messageInterface { return false }
    if let member, member.rawValue != messageMember { return false }
    return true
  }
}

/// A received signal.
public struct Signal: Sendable {
  /// The sender's unique name.
  public var sender: BusName?
  public var path: ObjectPath
  public var interface: InterfaceName
  public var member: MemberName
  public var arguments: [DBusValue]

  public init(
    sender: BusName?, path: ObjectPath, interface: InterfaceName, member: MemberName,
    arguments: [DBusValue]
  ) {
    self.sender = sender
    self.path = path
    self.interface = interface
    self.member = member
    self.arguments = arguments
  }
}

/// The header of a received signal: who sent it, and which object, interface and member.
public struct SignalHeader: Sendable {
  /// The sender's unique name.
  public var sender: BusName?
  public var path: ObjectPath
  public var interface: InterfaceName
  public var member: MemberName

  public init(sender: BusName?, path: ObjectPath, interface: InterfaceName, member: MemberName) {
    self.sender = sender
    self.path = path
    self.interface = interface
    self.member = member
  }
}

/// What one subscription delivers (signals, or values read from them), in arrival order,
/// buffered without limit (none are lost).
///
/// The stream finishes normally when the subscription is cancelled or the connection is
/// closed, and throws ``DBusError/Code/disconnected`` when the connection to the bus is lost
/// (the bus daemon stopped or restarted): nothing more can arrive then.
///
/// The match rule is removed from the bus when iteration ends by cancellation, when `cancel()`
/// is called, or when the stream and its iterators are dropped.
public struct SubscriptionStream<Element: Sendable>: AsyncSequence, Sendable {
  public typealias Failure = DBusError

  let stream: AsyncThrowingStream<Element, any Error>
  let token: SubscriptionToken

  public struct AsyncIterator: AsyncIteratorProtocol {
    public typealias Failure = DBusError
    var base: AsyncThrowingStream<Element, any Error>.Iterator
    let token: SubscriptionToken
    public mutating func next() async throws(DBusError) -> Element? {
      do {
        return try await base.next()
      } catch {
        // The only error the stream is finished with (see `SubscriptionToken`).
        throw error as? DBusError ?? .disconnectedError()
      }
    }
  }

  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(base: stream.makeAsyncIterator(), token: token)
  }

  /// Ends the subscription now: the stream finishes and the match rule is removed.
  public func cancel() { token.end() }
}

/// Signals matching one rule (see ``SubscriptionStream``).
public typealias SignalStream = SubscriptionStream<Signal>

/// A handler installed with ``DBusConnection/handleSignals(_:_:)``. `cancel()`, or dropping the
/// last copy, removes the handler and its match rule.
public struct SignalSubscription: Sendable {
  let token: SubscriptionToken

  /// Ends the subscription now: the handler is not called again and the match rule is removed.
  public func cancel() { token.end() }
}

/// Ends a subscription when the last stream or iterator referring to it goes away.
final class SubscriptionToken: Sendable {
  let connection: DBusConnection
  let id: UInt64
  init(connection: DBusConnection, id: UInt64) {
    self.connection = connection
    self.id = id
  }
  func end() { connection.endSubscription(id: id) }
  deinit { connection.endSubscription(id: id) }
}

/// How a subscription takes its signals: decoded into ``DBusValue``s, or read by the handler.
enum SignalDelivery: Sendable {
  case values(@Sendable (Signal) -> Void)
  case reader(@Sendable (SignalHeader, inout MessageReader) -> Void)
}

extension SignalDelivery {
  /// Whether the body must be decoded for this delivery.
  var takesValues: Bool {
    if case .values = self { return true }
    return false
  }
}

/// One signal subscription. Queue-confined.
struct Subscription {
  let rule: MatchRule
  let ruleString: String
  /// Called on the queue with each matching signal, in arrival order.
  let delivery: SignalDelivery
  /// Called on the queue once, when the subscription ends: with the error when the connection
  /// was lost, with nil otherwise.
  var onEnd: [@Sendable (DBusError?) -> Void]
  /// Whether the bus accepted the match rule (so it must be removed at the end).
  var matchAdded = false
  /// For a rule with a well-known sender: that name's current owner, tracked by the connection.
  var senderOwner: String?

  func finish(_ error: DBusError? = nil) {
    for action in onEnd { action(error) }
  }
}

extension DBusConnection {
  /// Adds the match rule on the bus and yields matching signals in arrival order; ending
  /// iteration (or dropping the stream) removes the match rule. Unbounded buffering. The stream
  /// throws ``DBusError/Code/disconnected`` when the connection to the bus is lost.
  public func signals(_ rule: MatchRule) async throws(DBusError) -> SignalStream {
    try await subscriptionStream(rule) { $0 }
  }

  /// A stream of `transform`'s non-nil results for the signals matching `rule`, finished (or
  /// failed, when the connection is lost) with the subscription.
  func subscriptionStream<Element: Sendable>(
    _ rule: MatchRule, _ transform: @escaping @Sendable (Signal) -> Element?
  ) async throws(DBusError) -> SubscriptionStream<Element> {
    // Unbounded: a signal stream's consumer (the object tree, name tracking) rebuilds state
    // from every signal; dropping one would leave it wrong.
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: Element.self, throwing: (any Error).self, bufferingPolicy: .unbounded)
    let token = try await subscribe(
      rule,
      deliver: { signal in
        if let element = transform(signal) { continuation.yield(element) }
      },
      onEnd: { error in continuation.finish(throwing: error) })
    let id = token.id
    continuation.onTermination = { [weak self] _ in self?.endSubscription(id: id) }
    return SubscriptionStream(stream: stream, token: token)
  }

  /// Adds the match rule on the bus and calls `handler` with each matching signal, on the
  /// connection's queue, in arrival order (the same order as every other handler and stream of
  /// this connection), without a task hop in between. The handler must return quickly and must
  /// not wait for this connection. The subscription lasts until the returned value is cancelled
  /// or dropped, or the connection closes.
  ///
  /// `onEnd` is called once, on the queue, when the subscription ends: with
  /// ``DBusError/Code/disconnected`` when the connection to the bus was lost (the bus daemon
  /// stopped or restarted), with nil when it was cancelled or the connection closed.
  public func handleSignals(
    _ rule: MatchRule, _ handler: @escaping @Sendable (Signal) -> Void,
    onEnd: @escaping @Sendable (DBusError?) -> Void = { _ in }
  ) async throws(DBusError) -> SignalSubscription {
    SignalSubscription(token: try await subscribe(rule, deliver: handler, onEnd: onEnd))
  }

  /// Like ``handleSignals(_:_:onEnd:)``, but `handler` reads each signal's arguments itself,
  /// into the shapes it keeps (see ``MessageReader``), instead of receiving the whole body as
  /// ``DBusValue``s. The reader is valid only during the call.
  public func handleSignals(
    _ rule: MatchRule,
    reading handler: @escaping @Sendable (SignalHeader, inout MessageReader) -> Void,
    onEnd: @escaping @Sendable (DBusError?) -> Void = { _ in }
  ) async throws(DBusError) -> SignalSubscription {
    SignalSubscription(token: try await subscribe(rule, delivery: .reader(handler), onEnd: onEnd))
  }

  /// Registers a subscription, adds its match rule on the bus and, for a well-known sender,
  /// starts tracking that name's owner. Signals are delivered from the moment the subscription
  /// is registered (before the bus has confirmed the rule).
  func subscribe(
    _ rule: MatchRule, deliver: @escaping @Sendable (Signal) -> Void,
    onEnd: @escaping @Sendable (DBusError?) -> Void
  ) async throws(DBusError) -> SubscriptionToken {
    try await subscribe(rule, delivery: .values(deliver), onEnd: onEnd)
  }

  func subscribe(
    _ rule: MatchRule, delivery: SignalDelivery,
    onEnd: @escaping @Sendable (DBusError?) -> Void
  ) async throws(DBusError) -> SubscriptionToken {
    let id = nextID.add(1, ordering: .relaxed).newValue
    let ruleString = rule.ruleString
    try onQueueSync { () throws(DBusError) in
      guard !isClosed else { throw DBusError.disconnectedError() }
      subscriptions[id] = Subscription(
        rule: rule, ruleString: ruleString, delivery: delivery, onEnd: [onEnd])
    }
    let token = SubscriptionToken(connection: self, id: id)
    _ = try await callBus("AddMatch", [.string(ruleString)])
    queue.async {
      if self.subscriptions[id] != nil {
        self.subscriptions[id]!.matchAdded = true
      } else if !self.isClosed {
        // Ended while AddMatch was in flight: take the rule back off the bus.
        self.sendRemoveMatch(ruleString)
      }
    }
    if let sender = rule.sender, !sender.isUnique, sender != .bus {
      try await trackOwner(of: sender, forSubscription: id)
    }
    return token
  }

  /// The match rules of the connection's live subscriptions, oldest first: what it asked the
  /// bus to send it (the rules a subscription adds to follow a sender's owner included).
  package var subscribedRules: [MatchRule] {
    (try? onQueueSync { subscriptions.sorted { $0.key < $1.key }.map(\.value.rule) }) ?? []
  }

  /// Ends a subscription: finishes its stream and removes its match rule from the bus.
  func endSubscription(id: UInt64) {
    queue.async {
      guard let subscription = self.subscriptions.removeValue(forKey: id) else { return }
      subscription.finish()
      if subscription.matchAdded && !self.isClosed {
        self.sendRemoveMatch(subscription.ruleString)
      }
    }
  }

  private func sendRemoveMatch(_ rule: String) {
    assertOnQueue()
    guard
      let message = try? DBusMessage.methodCall(
        destination: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: "RemoveMatch")
    else { return }
    message.noReplyExpected = true
    guard (try? message.append([.string(rule)])) != nil else { return }
    _ = dbus_connection_send(raw, message.raw, nil)
  }

  /// Calls a method of the bus daemon itself.
  func callBus(_ member: MemberName, _ arguments: [DBusValue]) async throws(DBusError)
    -> [DBusValue]
  {
    try await call(
      destination: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: member,
      arguments: arguments)
  }

  /// Keeps `senderOwner` of a subscription up to date for a well-known sender name. Both the
  /// owner changes and the first answer are applied on the queue, so a change never races
  /// the signals it concerns.
  private func trackOwner(of name: BusName, forSubscription id: UInt64) async throws(DBusError) {
    let tracker = try await subscribe(
      .nameOwnerChanged(name),
      deliver: { [weak self] signal in
        guard let self, let change = NameOwnerChange(signal) else { return }
        self.subscriptions[id]?.senderOwner = change.newOwner?.rawValue ?? ""
      }, onEnd: { _ in })
    let current = try await nameOwner(name)
    queue.async {
      guard self.subscriptions[id] != nil else {
        tracker.end()
        return
      }
      // A change seen since the question is newer than (or as new as) the answer.
      if self.subscriptions[id]!.senderOwner == nil {
        self.subscriptions[id]!.senderOwner = current?.rawValue ?? ""
      }
      self.subscriptions[id]!.onEnd.append { _ in tracker.end() }
    }
  }

  /// The first argument of `message` when it is a string (`s`), for a rule's `arg0`, read
  /// without decoding the rest of the body.
  private static func firstStringArgument(of message: OpaquePointer) -> String? {
    var iter = DBusMessageIter()
    guard dbus_message_iter_init(message, &iter) != 0,
      dbus_message_iter_get_arg_type(&iter) == TypeCode.string,
      let pointer = blekit_iter_get_string(&iter)
    else { return nil }
    return String(cString: pointer)
  }

  /// Delivers an incoming signal to every matching subscription. On the queue.
  func deliverSignal(_ message: OpaquePointer) {
    assertOnQueue()
    guard !subscriptions.isEmpty,
      let cPath = dbus_message_get_path(message),
      let cInterface = dbus_message_get_interface(message),
      let cMember = dbus_message_get_member(message)
    else { return }
    let sender = dbus_message_get_sender(message).map { String(cString: $0) }
    let path = String(cString: cPath)
    let interface = String(cString: cInterface)
    let member = String(cString: cMember)
    var decoded: [DBusValue]?
    // arg0 of the match rules: the first argument when it is a string (read once, alone).
    var firstString: String?
    var firstStringRead = false
    var signal: Signal?
    var header: SignalHeader?
    if subscriptionsInOrder == nil {
      subscriptionsInOrder = subscriptions.sorted(by: { $0.key < $1.key }).map(\.value)
    }
    for subscription in subscriptionsInOrder! {
      guard
        subscription.rule.matchesHeader(
          sender: sender, senderOwner: subscription.senderOwner, path: path,
          interface: interface, member: member)
      else { continue }
      if let arg0 = subscription.rule.arg0 {
        if !firstStringRead {
          firstString = Self.firstStringArgument(of: message)
          firstStringRead = true
        }
        guard firstString == arg0 else { continue }
      }
      if subscription.delivery.takesValues, decoded == nil {
        guard let values = try? MessageReader.arguments(of: message) else { return }
        decoded = values
      }
      if header == nil {
        header = SignalHeader(
          sender: sender.map { BusName(unchecked: $0) }, path: ObjectPath(unchecked: path),
          interface: InterfaceName(unchecked: interface), member: MemberName(unchecked: member))
      }
      switch subscription.delivery {
      case .values(let deliver):
        if signal == nil {
          signal = Signal(
            sender: header!.sender, path: header!.path, interface: header!.interface,
            member: header!.member, arguments: decoded ?? [])
        }
        deliver(signal!)
      case .reader(let read):
        guard var reader = try? MessageReader(message) else { continue }
        read(header!, &reader)
      }
    }
  }
}
