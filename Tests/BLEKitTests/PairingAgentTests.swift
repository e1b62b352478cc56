import BlueZ
import Bluetooth
import DBus
import Foundation
import Synchronization
// The pairing agent: decoding bluetoothd's questions, the answer policy, the exported
// org.bluez.Agent1 (bluetoothd-only) and its registration, on a private bus with a stand-in
// AgentManager1.
import TestSupport
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1)))
struct PairingAgentTests {
  static let device: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_42"
  static let address = BluetoothAddress(rawValue: "00:AA:01:01:00:42")!

  // MARK: Decoding and replies (no bus)

  @Test func decodesEveryQuestion() {
    let device = DBusValue.objectPath(Self.device)
    #expect(
      Agent1.request(member: "RequestPinCode", arguments: [device])
        == .requestPinCode(device: Self.device))
    #expect(
      Agent1.request(member: "DisplayPinCode", arguments: [device, .string("0042")])
        == .displayPinCode(device: Self.device, pinCode: "0042"))
    #expect(
      Agent1.request(member: "RequestPasskey", arguments: [device])
        == .requestPasskey(device: Self.device))
    #expect(
      Agent1.request(member: "DisplayPasskey", arguments: [device, .uint32(123), .uint16(2)])
        == .displayPasskey(device: Self.device, passkey: 123, entered: 2))
    #expect(
      Agent1.request(member: "RequestConfirmation", arguments: [device, .uint32(999_999)])
        == .requestConfirmation(device: Self.device, passkey: 999_999))
    #expect(
      Agent1.request(member: "RequestAuthorization", arguments: [device])
        == .requestAuthorization(device: Self.device))
    #expect(
      Agent1.request(member: "AuthorizeService", arguments: [device, .string("180f")])
        == .authorizeService(device: Self.device, uuid: "180f"))
    #expect(Agent1.request(member: "Cancel", arguments: []) == nil)
    #expect(Agent1.request(member: "RequestConfirmation", arguments: [device]) == nil)
  }

  @Test func repliesMatchTheQuestion() throws {
    let pin = AgentRequest.requestPinCode(device: Self.device)
    let passkey = AgentRequest.requestPasskey(device: Self.device)
    let confirm = AgentRequest.requestConfirmation(device: Self.device, passkey: 1)
    #expect(try Agent1.reply(to: pin, with: .pinCode("1234")) == [.string("1234")])
    #expect(try Agent1.reply(to: passkey, with: .passkey(999_999)) == [.uint32(999_999)])
    #expect(try Agent1.reply(to: confirm, with: .accept) == [])
    #expect(throws: AgentRefusal.self) { try Agent1.reply(to: passkey, with: .passkey(1_000_000)) }
    #expect(throws: AgentRefusal.self) { try Agent1.reply(to: pin, with: .pinCode("")) }
    #expect(throws: AgentRefusal.self) {
      try Agent1.reply(to: pin, with: .pinCode(String(repeating: "1", count: 17)))
    }
    #expect(throws: AgentRefusal.self) { try Agent1.reply(to: passkey, with: .accept) }
    #expect(throws: AgentRefusal.self) { try Agent1.reply(to: confirm, with: .passkey(1)) }
  }

  @Test func addressComesFromTheDevicePath() {
    #expect(PairingResponder.address(of: Self.device) == Self.address)
    #expect(PairingResponder.address(of: "/org/bluez/hci0") == nil)
  }

  // MARK: The answer policy

  @Test func automaticConfirmsAuthorizesAndLogs() async throws {
    let log = EventLog()
    let responder = PairingResponder(confirmation: .automatic, events: log.record)
    #expect(
      try await responder.answer(.requestConfirmation(device: Self.device, passkey: 4242))
        == .accept)
    #expect(try await responder.answer(.requestAuthorization(device: Self.device)) == .accept)
    #expect(
      try await responder.answer(.authorizeService(device: Self.device, uuid: "180f")) == .accept)
    #expect(
      try await responder.answer(.displayPasskey(device: Self.device, passkey: 7, entered: 0))
        == .accept)
    #expect(
      log.events == [
        .confirmed(Self.address, passkey: 4242, automatically: true),
        .authorized(Self.address, automatically: true),
        .serviceAuthorized(Self.address, uuid: "180f", automatically: true),
        .displayPasskey(Self.address, passkey: 7, entered: 0),
      ])
  }

  @Test func automaticRefusesTypedInput() async {
    let log = EventLog()
    let responder = PairingResponder(confirmation: .automatic, events: log.record)
    await #expect(throws: AgentRefusal.self) {
      try await responder.answer(.requestPasskey(device: Self.device))
    }
    await #expect(throws: AgentRefusal.self) {
      try await responder.answer(.requestPinCode(device: Self.device))
    }
    #expect(log.events.count == 2)
    guard case .refused(let address, let question, _)? = log.events.first else {
      Issue.record("expected a refusal event, got \(log.events)")
      return
    }
    #expect(address == Self.address)
    #expect(question == "RequestPasskey")
  }

  @Test func promptAnswersAndRefusals() async throws {
    let asked = Mutex<[PairingQuestion]>([])
    let responder = PairingResponder(
      confirmation: .prompt { question in
        asked.withLock { $0.append(question) }
        switch question.request {
        case .requestPasskey: return .passkey(123_456)
        case .requestConfirmation(_, let passkey): return passkey == 1 ? .accept : nil
        default: return nil
        }
      }, events: { _ in })
    #expect(try await responder.answer(.requestPasskey(device: Self.device)) == .passkey(123_456))
    #expect(
      try await responder.answer(.requestConfirmation(device: Self.device, passkey: 1)) == .accept)
    await #expect(throws: AgentRefusal.rejected("the user said no")) {
      try await responder.answer(.requestConfirmation(device: Self.device, passkey: 2))
    }
    #expect(asked.withLock { $0.count } == 3)
    #expect(asked.withLock { $0.first?.address } == Self.address)
  }

  @Test func cancelDropsThePendingPrompt() async throws {
    let started = AsyncStream.makeStream(of: Void.self)
    let responder = PairingResponder(
      confirmation: .prompt { _ in
        started.continuation.yield()
        // Waits until cancelled, as a prompt with nobody at the terminal.
        try? await Task.sleep(for: .seconds(3600))
        return .accept
      }, events: { _ in })
    let answer = Task {
      try await responder.answer(.requestConfirmation(device: Self.device, passkey: 1))
    }
    var iterator = started.stream.makeAsyncIterator()
    await iterator.next()
    responder.cancelPending()
    await #expect(throws: AgentRefusal.canceled("the question was cancelled")) {
      try await answer.value
    }
  }

  // MARK: On a bus

  @Test func exportedAgentAnswersOnlyBluetoothd() async throws {
    let bus = try AgentTestBus()
    defer { bus.stop() }
    let bluetoothd = try bus.connect()
    let app = try bus.connect()
    let stranger = try bus.connect()
    defer {
      bluetoothd.close()
      app.close()
      stranger.close()
    }
    let agent = Agent1(answer: { request throws(AgentRefusal) in
      switch request {
      case .requestPasskey: return .passkey(654_321)
      case .requestConfirmation(_, let passkey):
        guard passkey == 111_111 else { throw .rejected("wrong passkey") }
        return .accept
      default: return .accept
      }
    })
    let check = BluetoothdCallerCheck(fixedOwner: bluetoothd.uniqueName)
    try app.export(agent.exportedObject(callerCheck: check), at: "/test/agent")

    func call(_ from: DBusConnection, _ member: MemberName, _ arguments: [DBusValue])
      async throws -> [DBusValue]
    {
      try await from.call(
        destination: app.uniqueName, path: "/test/agent", interface: Agent1.interface,
        member: member, arguments: arguments)
    }
    let device = DBusValue.objectPath(Self.device)
    #expect(try await call(bluetoothd, "RequestPasskey", [device]) == [.uint32(654_321)])
    #expect(try await call(bluetoothd, "RequestConfirmation", [device, .uint32(111_111)]) == [])
    #expect(try await call(bluetoothd, "Cancel", []) == [])

    let refused = await #expect(throws: DBusError.self) {
      _ = try await call(bluetoothd, "RequestConfirmation", [device, .uint32(222_222)])
    }
    #expect(refused?.name == "org.bluez.Error.Rejected")
    let stranger1 = await #expect(throws: DBusError.self) {
      _ = try await call(stranger, "RequestPasskey", [device])
    }
    #expect(stranger1?.name == "org.bluez.Error.NotAuthorized")
    let stranger2 = await #expect(throws: DBusError.self) {
      _ = try await call(stranger, "Release", [])
    }
    #expect(stranger2?.name == "org.bluez.Error.NotAuthorized")
  }

  @Test func registersAsDefaultAndUnregisters() async throws {
    let bus = try AgentTestBus()
    defer { bus.stop() }
    let bluetoothd = try bus.connect()
    let app = try bus.connect()
    defer {
      bluetoothd.close()
      app.close()
    }
    _ = try await bluetoothd.requestName(BlueZ.service)
    let calls = Mutex<[String]>([])
    let manager = ExportedInterface(
      name: AgentManager1.interface,
      methods: [
        ExportedMethod(name: "RegisterAgent", inSignature: "os", outSignature: "") {
          invocation in
          let capability = invocation.arguments[1].stringValue ?? ""
          calls.withLock { $0.append("register \(capability)") }
          return []
        },
        ExportedMethod(name: "RequestDefaultAgent", inSignature: "o", outSignature: "") { _ in
          calls.withLock { $0.append("default") }
          return []
        },
        ExportedMethod(name: "UnregisterAgent", inSignature: "o", outSignature: "") { _ in
          calls.withLock { $0.append("unregister") }
          return []
        },
      ])
    try bluetoothd.export(ExportedObject(interfaces: [manager]), at: AgentManager1.path)

    let agent = try await PairingAgent.register(
      on: app, capability: .displayYesNo, asDefault: true)
    #expect(agent.isRegistered)
    #expect(calls.withLock { $0 } == ["register DisplayYesNo", "default"])
    // bluetoothd (the owner of org.bluez) can call it; it was exported at the default path.
    let reply = try await bluetoothd.call(
      destination: app.uniqueName, path: PairingAgent.defaultPath, interface: Agent1.interface,
      member: "RequestAuthorization", arguments: [.objectPath(Self.device)])
    #expect(reply == [])

    // A restarted bluetoothd knows no agents: registering again repeats both calls, with the
    // same capability, on the same exported object.
    calls.withLock { $0.removeAll() }
    try await agent.registerAgain()
    #expect(agent.isRegistered)
    #expect(calls.withLock { $0 } == ["register DisplayYesNo", "default"])

    #expect(await agent.unregister() == nil)
    #expect(!agent.isRegistered)
    #expect(calls.withLock { $0.last } == "unregister")
    // Once unregistered, it cannot come back.
    await #expect(throws: BlueZError.self) { try await agent.registerAgain() }
    await #expect(throws: DBusError.self) {
      _ = try await bluetoothd.call(
        destination: app.uniqueName, path: PairingAgent.defaultPath,
        interface: Agent1.interface, member: "RequestAuthorization",
        arguments: [.objectPath(Self.device)])
    }
    // Idempotent: a second unregister calls nothing.
    #expect(await agent.unregister() == nil)
    #expect(calls.withLock { $0.filter { $0 == "unregister" }.count } == 1)
  }
}

/// Records agent events in order.
private final class EventLog: Sendable {
  private let stored = Mutex<[PairingAgentEvent]>([])
  var events: [PairingAgentEvent] { stored.withLock { $0 } }
  var record: @Sendable (PairingAgentEvent) -> Void {
    { [self] event in stored.withLock { $0.append(event) } }
  }
}

/// A private dbus-daemon for one test.
private typealias AgentTestBus = PrivateBus
