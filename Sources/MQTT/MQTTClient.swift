// MQTTClient: one libmosquitto client, its network thread (mosquitto_loop_start), a bounded
// outgoing buffer for when the broker is away, and streams of events and received messages.

import CMosquitto
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What happened to the connection, in order.
public enum MQTTEvent: Sendable, Hashable {
  /// Connected (again) to the broker; `reconnection` is false for the first time.
  case connected(reconnection: Bool)
  /// The connection was lost (the reason as libmosquitto gives it); libmosquitto reconnects
  /// with backoff.
  case disconnected(reason: String)
  /// The broker refused a reconnection (CONNACK's reason).
  case refused(reason: String)
  /// The outgoing buffer was full and its oldest messages were dropped: the total so far.
  case dropped(total: Int)
}

/// Counts of what went through a client.
public struct MQTTStatistics: Sendable, Hashable {
  /// Messages given to ``MQTTClient/publish(_:)``.
  public var offered = 0
  /// Messages handed to libmosquitto's connection.
  public var handedOver = 0
  /// Handed-over messages libmosquitto reported done (QoS 0 written, QoS 1 acknowledged).
  public var completed = 0
  /// Messages dropped because the outgoing buffer was full.
  public var dropped = 0
  /// Messages waiting in the outgoing buffer.
  public var buffered = 0
  /// Times the connection came back after a loss.
  public var reconnections = 0
  /// Messages received on the subscriptions.
  public var received = 0
  /// Received messages dropped because the reader did not keep up.
  public var receivedDropped = 0
  /// Received messages dropped unread because their payload was over
  /// ``MQTTConfiguration/maximumPayloadSize``.
  public var receivedTooLarge = 0
  /// Received messages waiting for the reader (at the end: never read).
  public var receivedWaiting = 0

  /// Handed over but not yet reported done.
  public var inFlight: Int { handedOver - completed }
}

/// An MQTT client over libmosquitto.
///
/// libmosquitto's own thread runs the connection and reconnects with exponential backoff.
/// ``publish(_:)`` never blocks: while the broker is away messages wait in a bounded
/// ``OutgoingBuffer`` and are sent, in order, once it is back; the oldest are dropped, counted,
/// when it is full. QoS 1 messages handed over are libmosquitto's to resend until the broker
/// acknowledges them.
///
/// `@unchecked Sendable`: the C handle is used from libmosquitto's thread (callbacks), from one
/// serial queue (sending) and from the caller (subscribe, close); libmosquitto locks its own
/// state for those calls, and every Swift field that changes lives in `state`, a `Mutex`.
public final class MQTTClient: @unchecked Sendable {
  private struct State {
    var buffer: OutgoingBuffer
    var statistics = MQTTStatistics()
    var connected = false
    var everConnected = false
    var drainScheduled = false
    var closing = false
    var subscriptions: [(String, QualityOfService)] = []
    var startWaiter: CheckedContinuation<MQTTError?, Never>?
    /// The last error-level line libmosquitto logged before the first connection.
    var loggedError: String?
    /// Network threads restarted since the last connection (see `restartNetworkThread`).
    var threadRestarts = 0
  }

  private let handle: OpaquePointer
  private let birth: MQTTMessage?
  private let maximumPayloadSize: Int?
  private let state: Mutex<State>
  private let sender = DispatchQueue(label: "blekit.mqtt.sender")
  /// Where restarts of libmosquitto's network thread wait their turn.
  private let supervisor = DispatchQueue(label: "blekit.mqtt.supervisor")
  /// Held while the network thread is stopped or started: a restart and the final stop never
  /// overlap.
  private let networkThread = Mutex(())
  /// The first and the longest wait before a restart of the network thread (seconds).
  private let restartDelays: (first: Int, longest: Int)
  private let eventContinuation: AsyncStream<MQTTEvent>.Continuation
  private let received: ReceiveQueue
  /// The connection's events, oldest first (the newest 256 are kept for a slow reader).
  public let events: AsyncStream<MQTTEvent>
  /// Messages received on the subscriptions, for one reader; at most
  /// ``MQTTConfiguration/receiveCapacity`` messages and
  /// ``MQTTConfiguration/receiveByteCapacity`` bytes wait (the oldest dropped beyond,
  /// counted in ``MQTTStatistics/receivedDropped``).
  public let messages: AsyncStream<MQTTMessage>
  /// The broker this client talks to.
  public let broker: BrokerURL

  private static let libraryReady: Void = { _ = mosquitto_lib_init() }()

  /// Connects to the broker and starts the network thread; returns once the broker accepted
  /// the connection.
  ///
  /// Throws ``MQTTError`` `.unreachable` when the broker cannot be reached within
  /// ``MQTTConfiguration/connectTimeout``, `.refused` when it answers with a refusal, and
  /// `.invalidSetting` for settings libmosquitto rejects. After a successful start, losing the
  /// broker never throws: the client reconnects and buffers.
  public static func connect(_ configuration: MQTTConfiguration) async throws(MQTTError)
    -> MQTTClient
  {
    let client = try MQTTClient(configuration)
    if let error = await client.start(configuration) {
      client.shutDownNetwork()
      throw error
    }
    return client
  }

  private init(_ configuration: MQTTConfiguration) throws(MQTTError) {
    _ = Self.libraryReady
    guard configuration.clientID != nil || configuration.cleanSession else {
      throw MQTTError(.invalidSetting, "a persistent session needs a client ID")
    }
    guard let handle = mosquitto_new(configuration.clientID, configuration.cleanSession, nil)
    else {
      throw MQTTError(.invalidSetting, "libmosquitto could not create a client")
    }
    self.handle = handle
    birth = configuration.birth
    maximumPayloadSize = configuration.maximumPayloadSize.map { Swift.max(0, $0) }
    broker = configuration.broker
    let first = Swift.max(1, configuration.reconnectDelay)
    restartDelays = (first, Swift.max(first, configuration.maximumReconnectDelay))
    state = Mutex(State(buffer: OutgoingBuffer(capacity: configuration.bufferCapacity)))
    (events, eventContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
    let received = ReceiveQueue(
      capacity: configuration.receiveCapacity, byteCapacity: configuration.receiveByteCapacity)
    self.received = received
    messages = AsyncStream(unfolding: { await received.next() })
    mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
    mosquitto_connect_callback_set(handle) { _, context, code in
      MQTTClient.from(context).didConnect(code)
    }
    mosquitto_disconnect_callback_set(handle) { _, context, code in
      MQTTClient.from(context).didDisconnect(code)
    }
    mosquitto_log_callback_set(handle) { _, context, level, text in
      guard level & MOSQ_LOG_ERR != 0, let text else { return }
      MQTTClient.from(context).didLogError(String(cString: text))
    }
    mosquitto_publish_callback_set(handle) { _, context, _ in
      MQTTClient.from(context).didComplete()
    }
    mosquitto_message_callback_set(handle) { _, context, message in
      guard let message else { return }
      MQTTClient.from(context).didReceive(message.pointee)
    }
    do throws(MQTTError) {
      try configure(configuration)
    } catch {
      mosquitto_destroy(handle)
      throw error
    }
  }

  deinit {
    // Normally closed already; if not, stop libmosquitto's thread before the handle goes.
    shutDownNetwork()
    mosquitto_destroy(handle)
  }

  private static func from(_ context: UnsafeMutableRawPointer?) -> MQTTClient {
    Unmanaged<MQTTClient>.fromOpaque(context!).takeUnretainedValue()
  }

  private func configure(_ configuration: MQTTConfiguration) throws(MQTTError) {
    let user = configuration.user ?? configuration.broker.user
    let password = configuration.password ?? configuration.broker.password
    if user != nil || password != nil {
      try check(mosquitto_username_pw_set(handle, user, password), "user name and password")
    }
    if let will = configuration.will {
      let code = will.payload.withUnsafeBytes { bytes in
        mosquitto_will_set(
          handle, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue,
          will.retain)
      }
      try check(code, "last will on \(will.topic)")
    }
    try check(
      mosquitto_reconnect_delay_set(
        handle, UInt32(Swift.max(1, configuration.reconnectDelay)),
        UInt32(Swift.max(configuration.reconnectDelay, configuration.maximumReconnectDelay)), true),
      "reconnect delay")
    if configuration.broker.usesTLS {
      let file = configuration.certificateAuthorities
      try check(
        mosquitto_tls_set(handle, file, file == nil ? "/etc/ssl/certs" : nil, nil, nil, nil),
        "TLS certificate authorities")
    }
  }

  private func check(_ code: Int32, _ what: String) throws(MQTTError) {
    guard code == MOSQ_ERR_SUCCESS.rawValue else {
      throw MQTTError(.invalidSetting, "\(what): \(String(cString: mosquitto_strerror(code)))")
    }
  }

  /// Starts connecting and the network thread; returns the error that ended the first attempt.
  private func start(_ configuration: MQTTConfiguration) async -> MQTTError? {
    let broker = configuration.broker
    let code = mosquitto_connect_async(
      handle, broker.host, Int32(broker.port), Int32(configuration.keepAlive))
    guard code == MOSQ_ERR_SUCCESS.rawValue else {
      let logged = state.withLock { $0.loggedError }.map { " (\($0))" } ?? ""
      return MQTTError(
        .unreachable,
        "cannot reach the MQTT broker at \(broker): \(Self.reason(code))\(logged)")
    }
    let loop = mosquitto_loop_start(handle)
    guard loop == MOSQ_ERR_SUCCESS.rawValue else {
      return MQTTError(.unreachable, "cannot start the MQTT network thread: \(Self.reason(loop))")
    }
    let timeout = configuration.connectTimeout
    let timer = Task { [weak self] in
      try? await Task.sleep(for: timeout)
      self?.finishStart(
        MQTTError(
          .unreachable,
          "the MQTT broker at \(broker) did not accept a connection within \(timeout)"))
    }
    defer { timer.cancel() }
    return await withCheckedContinuation { continuation in
      let ready = state.withLock { state -> MQTTError?? in
        if state.everConnected { return .some(nil) }
        if let logged = state.loggedError { return .some(refusal(logged)) }
        state.startWaiter = continuation
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }

  private func finishStart(_ error: MQTTError?) {
    state.withLock { state in
      let waiter = state.startWaiter
      state.startWaiter = nil
      return waiter
    }?.resume(returning: error)
  }

  private static func reason(_ code: Int32) -> String {
    if code == MOSQ_ERR_ERRNO.rawValue, let text = strerror(errno) {
      return String(cString: text)
    }
    return String(cString: mosquitto_strerror(code))
  }

  // MARK: libmosquitto's thread

  private func didConnect(_ code: Int32) {
    guard code == 0 else {
      let reason = String(cString: mosquitto_connack_string(code))
      let first = state.withLock { !$0.everConnected }
      if first {
        finishStart(MQTTError(.refused, "the MQTT broker at \(broker) refused: \(reason)"))
      } else {
        eventContinuation.yield(.refused(reason: reason))
      }
      return
    }
    let (reconnection, subscriptions) = state.withLock { state in
      let again = state.everConnected
      state.connected = true
      state.everConnected = true
      if again { state.statistics.reconnections += 1 }
      state.threadRestarts = 0
      return (again, state.subscriptions)
    }
    if let birth {
      let code = birth.payload.withUnsafeBytes { bytes in
        mosquitto_publish(
          handle, nil, birth.topic, Int32(bytes.count), bytes.baseAddress, birth.qos.rawValue,
          birth.retain)
      }
      // Counted as handed over, so that its completion balances (see `inFlight`).
      if code == MOSQ_ERR_SUCCESS.rawValue { state.withLock { $0.statistics.handedOver += 1 } }
    }
    for (filter, qos) in subscriptions {
      _ = mosquitto_subscribe(handle, nil, filter, qos.rawValue)
    }
    eventContinuation.yield(.connected(reconnection: reconnection))
    finishStart(nil)
    scheduleDrain()
  }

  private func didDisconnect(_ code: Int32) {
    let closing = state.withLock { state in
      state.connected = false
      return state.closing
    }
    if !closing {
      eventContinuation.yield(
        .disconnected(reason: code == 0 ? "closed" : String(cString: mosquitto_strerror(code))))
      if Self.endsNetworkThread(code) { scheduleThreadRestart() }
    }
  }

  /// Whether libmosquitto's network loop (`mosquitto_loop_forever`, which its thread runs)
  /// returns after a connection ended with `code` instead of reconnecting: libmosquitto 2.0
  /// takes these as final. One of them, a protocol error, is what a client sees when something
  /// in front of the broker (a proxy, a port forward) accepts the TCP connection and, the
  /// broker behind being down, answers with bytes that are not MQTT (an error line) and
  /// closes. Such a client never reconnects by itself.
  static func endsNetworkThread(_ code: Int32) -> Bool {
    let final: [mosq_err_t] = [
      MOSQ_ERR_NOMEM, MOSQ_ERR_PROTOCOL, MOSQ_ERR_INVAL, MOSQ_ERR_NOT_FOUND, MOSQ_ERR_TLS,
      MOSQ_ERR_PAYLOAD_SIZE, MOSQ_ERR_NOT_SUPPORTED, MOSQ_ERR_AUTH, MOSQ_ERR_ACL_DENIED,
      MOSQ_ERR_UNKNOWN, MOSQ_ERR_EAI, MOSQ_ERR_PROXY,
    ]
    return final.contains { $0.rawValue == code }
  }

  /// Starts the network thread again after the loop gave up, with the reconnection backoff
  /// (the first delay, doubling, up to the longest); the counts and the buffer carry on.
  private func scheduleThreadRestart() {
    let attempt = state.withLock { state in
      state.threadRestarts += 1
      return state.threadRestarts
    }
    let delay = Swift.min(
      restartDelays.first << Swift.min(attempt - 1, 16), restartDelays.longest)
    supervisor.asyncAfter(deadline: .now() + .seconds(delay)) { [weak self] in
      self?.restartNetworkThread()
    }
  }

  private func restartNetworkThread() {
    let code = networkThread.withLock { _ -> Int32 in
      guard !state.withLock({ $0.closing }) else { return MOSQ_ERR_SUCCESS.rawValue }
      // The thread has returned from its loop (it did so right after the disconnect callback):
      // joining it is immediate. `force` because libmosquitto asks for a disconnect before a
      // plain stop, and there was none: should the thread still run, it is cancelled.
      _ = mosquitto_loop_stop(handle, true)
      _ = mosquitto_reconnect_async(handle)
      return mosquitto_loop_start(handle)
    }
    if code != MOSQ_ERR_SUCCESS.rawValue {
      eventContinuation.yield(
        .disconnected(reason: "cannot restart the network thread: \(Self.reason(code))"))
      scheduleThreadRestart()
    }
  }

  /// libmosquitto's error-level log lines (a TLS handshake that failed, for one, is reported
  /// nowhere else). Before the first connection, the first one ends ``start(_:)``: the
  /// broker was reached and refused, and retrying would fail the same way.
  private func didLogError(_ text: String) {
    let starting = state.withLock { state -> Bool in
      guard !state.everConnected else { return false }
      if state.loggedError == nil { state.loggedError = text }
      return state.startWaiter != nil
    }
    guard starting else { return }
    finishStart(refusal(text))
  }

  /// The error of a first connection that libmosquitto logged as failed.
  private func refusal(_ text: String) -> MQTTError {
    let tls = broker.usesTLS ? " (TLS)" : ""
    return MQTTError(
      .unreachable, "the MQTT broker at \(broker) refused the connection\(tls): \(text)")
  }

  private func didComplete() {
    state.withLock { $0.statistics.completed += 1 }
  }

  /// A message from libmosquitto: dropped, counted, before anything is copied when its
  /// payload is over the limit.
  private func didReceive(_ received: mosquitto_message) {
    let length = Int(Swift.max(0, received.payloadlen))
    if let maximumPayloadSize, length > maximumPayloadSize {
      state.withLock { state in
        state.statistics.received += 1
        state.statistics.receivedTooLarge += 1
      }
      return
    }
    let bytes: [UInt8] =
      length > 0 && received.payload != nil
      ? Array(UnsafeRawBufferPointer(start: received.payload, count: length)) : []
    didReceive(
      MQTTMessage(
        topic: received.topic.map { String(cString: $0) } ?? "",
        payload: bytes, qos: received.qos > 0 ? .atLeastOnce : .atMostOnce,
        retain: received.retain))
  }

  private func didReceive(_ message: MQTTMessage) {
    let dropped = received.push(message)
    state.withLock { state in
      state.statistics.received += 1
      state.statistics.receivedDropped += dropped
    }
  }

  // MARK: Publishing

  /// Publishes a message: at once when connected, else after the broker comes back. Never
  /// blocks; when the buffer is full the oldest waiting message is dropped and counted.
  public func publish(_ message: MQTTMessage) {
    let dropped = state.withLock { state -> Int? in
      state.statistics.offered += 1
      let kept = state.buffer.append(message)
      state.statistics.buffered = state.buffer.count
      state.statistics.dropped = state.buffer.dropped
      return kept ? nil : state.buffer.dropped
    }
    if let dropped, dropped == 1 || dropped % 100 == 0 {
      eventContinuation.yield(.dropped(total: dropped))
    }
    scheduleDrain()
  }

  private func scheduleDrain() {
    let schedule = state.withLock { state -> Bool in
      guard state.connected, !state.drainScheduled, !state.buffer.isEmpty else { return false }
      state.drainScheduled = true
      return true
    }
    if schedule { sender.async { self.drain() } }
  }

  /// Hands waiting messages to libmosquitto, in order, while the connection is up.
  private func drain() {
    while true {
      let next = state.withLock { state -> MQTTMessage? in
        guard state.connected, let message = state.buffer.popFirst() else {
          state.drainScheduled = false
          return nil
        }
        return message
      }
      guard let message = next else { return }
      let code = message.payload.withUnsafeBytes { bytes in
        mosquitto_publish(
          handle, nil, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos.rawValue,
          message.retain)
      }
      let handedOver = code == MOSQ_ERR_SUCCESS.rawValue
      state.withLock { state in
        if handedOver {
          state.statistics.handedOver += 1
        } else if code == MOSQ_ERR_NO_CONN.rawValue || code == MOSQ_ERR_CONN_LOST.rawValue {
          // The connection went between the check and the call: wait for it again.
          state.buffer.pushFront(message)
          state.connected = false
        } else {
          // A message libmosquitto will never take (e.g. an invalid topic): counted as dropped.
          state.buffer.pushFront(message)
          _ = state.buffer.popFirst()
          state.statistics.handedOver += 1
          state.statistics.completed += 1
        }
        state.statistics.buffered = state.buffer.count
        state.statistics.dropped = state.buffer.dropped
      }
    }
  }

  /// Subscribes to a topic filter (wildcards allowed), now and after every reconnection.
  public func subscribe(_ filter: String, qos: QualityOfService = .atMostOnce) {
    let connected = state.withLock { state in
      state.subscriptions.append((filter, qos))
      return state.connected
    }
    if connected { _ = mosquitto_subscribe(handle, nil, filter, qos.rawValue) }
  }

  /// The next received message, as ``messages`` would give it (the same queue: use one or
  /// the other); `nil` once the client is closed or the calling task is cancelled.
  public func nextMessage() async -> MQTTMessage? {
    await received.next()
  }

  /// The counts so far.
  public var statistics: MQTTStatistics {
    state.withLock { state in
      var statistics = state.statistics
      statistics.receivedWaiting = received.waiting
      statistics.buffered = state.buffer.count
      statistics.dropped = state.buffer.dropped
      return statistics
    }
  }

  /// Whether the broker connection is up now.
  public var isConnected: Bool { state.withLock { $0.connected } }

  /// Waits up to `grace` for the buffer to empty and handed-over messages to complete, then
  /// disconnects (no last will) and stops the network thread. Returns the final counts.
  @discardableResult
  public func close(grace: Duration = .seconds(3)) async -> MQTTStatistics {
    let deadline = ContinuousClock.now + grace
    while ContinuousClock.now < deadline {
      let settled = state.withLock { state in
        state.buffer.isEmpty && state.statistics.inFlight == 0
      }
      if settled { break }
      try? await Task.sleep(for: .milliseconds(20))
    }
    sender.sync {}
    shutDownNetwork()
    return statistics
  }

  private func shutDownNetwork() {
    let already = state.withLock { state in
      defer { state.closing = true }
      return state.closing
    }
    guard !already else { return }
    // After any restart in progress, so that the disconnect reaches the connection the stop
    // waits for (a later restart sees `closing` and does nothing).
    networkThread.withLock { _ in
      _ = mosquitto_disconnect(handle)
      _ = mosquitto_loop_stop(handle, false)
    }
    state.withLock { $0.connected = false }
    eventContinuation.finish()
    received.finish()
  }
}
