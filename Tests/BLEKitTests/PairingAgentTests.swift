import BlueZ
import Bluetooth
import DBus
import Foundation
import Synchronization
// The pairing agent: the answer policy, the exported org.bluez.Agent1 (bluetoothd-only) and its
// registration, on a private bus with a stand-in AgentManager1. (Agent1's decoding of
// bluetoothd's questions and its replies: BlueZTests' Agent1MessageTests.)
import TestSupport
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1)))
struct PairingAgentTests {
  static let device: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_42"
  static let address = BluetoothAddress(rawValue: "00:AA:01:01:00:42")!

  // MARK: Device addresses (no bus)

  @Test func addressComesFromTheDevicePath() {
    #expect(PairingResponder.address(of: Self.device) == Self.address)
    #expect(PairingResponder.address(of: "/org/bluez/hci0") == nil)
  }

  // MARK: The answer policy

  static let other = BluetoothAddress(rawValue: "00:AA:01:00:00:99")!
  static let otherDevice: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_00_00_99"
  static let served = BlekitUUID.transferService

  /// One of each request kind, about `device`.
  static func everyRequest(_ device: ObjectPath) -> [AgentRequest] {
    [
      .requestPinCode(device: device),
      .displayPinCode(device: device, pinCode: "0042"),
      .requestPasskey(device: device),
      .displayPasskey(device: device, passkey: 7, entered: 0),
      .requestConfirmation(device: device, passkey: 4242),
      .requestAuthorization(device: device),
      .authorizeService(device: device, uuid: served.uuidString),
      .authorizeService(device: device, uuid: "0000110e-0000-1000-8000-00805f9b34fb"),
    ]
  }

  /// What every policy decides for every request kind, from a device on the list (or any
  /// device when there is no list) and from one off it.
  @Test func decisionsForEveryRequestKindAndPolicy() {
    let prompt = PairingConfirmation.prompt { _ in nil }
    let anyAuto = PairingPolicy(confirmation: .automatic, servedServices: [Self.served])
    let listAuto = PairingPolicy(
      confirmation: .automatic, allowedDevices: [Self.address], servedServices: [Self.served])
    let anyPrompt = PairingPolicy(confirmation: prompt, servedServices: [Self.served])
    let listPrompt = PairingPolicy(
      confirmation: prompt, allowedDevices: [Self.address], servedServices: [Self.served])
    let noServices = PairingPolicy(confirmation: .automatic)

    func decisions(_ policy: PairingPolicy, _ device: ObjectPath) -> [PairingDecision] {
      Self.everyRequest(device).map {
        policy.decide(PairingQuestion(request: $0, address: PairingResponder.address(of: device)))
      }
    }
    // Order: RequestPinCode, DisplayPinCode, RequestPasskey, DisplayPasskey,
    // RequestConfirmation, RequestAuthorization, AuthorizeService (served), (not served).
    let all = PairingAcceptance.acceptsEveryDevice
    #expect(
      decisions(anyAuto, Self.device) == [
        .refuse(.needsPerson), .accept(all), .refuse(.needsPerson), .accept(all),
        .refuse(.comparisonNeedsPerson), .accept(all), .accept(all), .refuse(.serviceNotServed),
      ])
    // --allow without --confirm: a comparison is refused (its yes would record an
    // authenticated key that nobody checked); "just works" (RequestAuthorization) is accepted.
    #expect(
      decisions(listAuto, Self.device) == [
        .refuse(.needsPerson), .accept(.allowed), .refuse(.needsPerson), .accept(.allowed),
        .refuse(.comparisonNeedsPerson), .accept(.allowed), .accept(.allowed),
        .refuse(.serviceNotServed),
      ])
    #expect(
      decisions(listAuto, Self.otherDevice) == Array(repeating: .refuse(.notAllowed), count: 8))
    #expect(
      decisions(anyPrompt, Self.device) == [
        .ask, .accept(all), .ask, .accept(all), .ask, .ask, .ask, .refuse(.serviceNotServed),
      ])
    #expect(
      decisions(listPrompt, Self.device) == [
        .ask, .accept(.allowed), .ask, .accept(.allowed), .ask, .ask, .ask,
        .refuse(.serviceNotServed),
      ])
    #expect(
      decisions(listPrompt, Self.otherDevice) == Array(repeating: .refuse(.notAllowed), count: 8))
    // No services served: AuthorizeService is refused whatever the UUID.
    #expect(decisions(noServices, Self.device)[6] == .refuse(.serviceNotServed))
    // A device path without an address is refused when there is a list.
    let noAddress = PairingQuestion(
      request: .requestAuthorization(device: "/org/bluez/hci0"), address: nil)
    #expect(listAuto.decide(noAddress) == .refuse(.notAllowed))
    #expect(anyAuto.decide(noAddress) == .accept(all))
    // A served UUID matches in any spelling (16-bit form, upper case).
    let battery = PairingPolicy(
      confirmation: .automatic, servedServices: [BluetoothUUID(uint16: 0x180F)])
    for spelling in ["180f", "0000180F-0000-1000-8000-00805F9B34FB"] {
      let question = PairingQuestion(
        request: .authorizeService(device: Self.device, uuid: spelling), address: Self.address)
      #expect(battery.decide(question) == .accept(all))
    }
  }

  @Test func automaticAnswersAndLogsEachDecision() async throws {
    let log = EventLog()
    let responder = PairingResponder(
      policy: PairingPolicy(confirmation: .automatic, servedServices: [Self.served]),
      events: log.record)
    let confirm = AgentRequest.requestConfirmation(device: Self.device, passkey: 4242)
    let authorize = AgentRequest.requestAuthorization(device: Self.device)
    let service = AgentRequest.authorizeService(device: Self.device, uuid: Self.served.uuidString)
    let foreign = AgentRequest.authorizeService(device: Self.device, uuid: "180f")
    await #expect(
      throws: AgentRefusal.rejected(PairingRefusal.comparisonNeedsPerson.description)
    ) {
      try await responder.answer(confirm)
    }
    #expect(try await responder.answer(authorize) == .accept)
    #expect(try await responder.answer(service) == .accept)
    await #expect(throws: AgentRefusal.rejected(PairingRefusal.serviceNotServed.description)) {
      try await responder.answer(foreign)
    }
    #expect(
      try await responder.answer(.displayPasskey(device: Self.device, passkey: 7, entered: 0))
        == .accept)
    func question(_ request: AgentRequest) -> PairingQuestion {
      PairingQuestion(request: request, address: Self.address)
    }
    #expect(
      log.events == [
        .refused(question(confirm), .comparisonNeedsPerson),
        .accepted(question(authorize), .acceptsEveryDevice),
        .accepted(question(service), .acceptsEveryDevice),
        .refused(question(foreign), .serviceNotServed),
        .displayPasskey(Self.address, passkey: 7, entered: 0),
      ])
  }

  @Test func allowListAcceptsOnlyTheDevicesNamed() async throws {
    let log = EventLog()
    let responder = PairingResponder(
      policy: PairingPolicy(confirmation: .automatic, allowedDevices: [Self.address]),
      events: log.record)
    #expect(try await responder.answer(.requestAuthorization(device: Self.device)) == .accept)
    await #expect(throws: AgentRefusal.rejected(PairingRefusal.notAllowed.description)) {
      try await responder.answer(.requestAuthorization(device: Self.otherDevice))
    }
    await #expect(throws: AgentRefusal.rejected(PairingRefusal.notAllowed.description)) {
      try await responder.answer(.requestConfirmation(device: Self.otherDevice, passkey: 1))
    }
    // A device off the list is not even shown a passkey.
    await #expect(throws: AgentRefusal.self) {
      try await responder.answer(.displayPasskey(device: Self.otherDevice, passkey: 1, entered: 0))
    }
    #expect(
      log.events == [
        .accepted(
          PairingQuestion(
            request: .requestAuthorization(device: Self.device), address: Self.address),
          .allowed),
        .refused(
          PairingQuestion(
            request: .requestAuthorization(device: Self.otherDevice), address: Self.other),
          .notAllowed),
        .refused(
          PairingQuestion(
            request: .requestConfirmation(device: Self.otherDevice, passkey: 1), address: Self.other
          ),
          .notAllowed),
        .refused(
          PairingQuestion(
            request: .displayPasskey(device: Self.otherDevice, passkey: 1, entered: 0),
            address: Self.other),
          .notAllowed),
      ])
  }

  @Test func automaticRefusesTypedInput() async {
    let log = EventLog()
    let responder = PairingResponder(
      policy: PairingPolicy(confirmation: .automatic), events: log.record)
    await #expect(throws: AgentRefusal.self) {
      try await responder.answer(.requestPasskey(device: Self.device))
    }
    await #expect(throws: AgentRefusal.self) {
      try await responder.answer(.requestPinCode(device: Self.device))
    }
    #expect(
      log.events == [
        .refused(
          PairingQuestion(request: .requestPasskey(device: Self.device), address: Self.address),
          .needsPerson),
        .refused(
          PairingQuestion(request: .requestPinCode(device: Self.device), address: Self.address),
          .needsPerson),
      ])
  }

  @Test func promptAnswersAndRefusals() async throws {
    let asked = Mutex<[PairingQuestion]>([])
    let log = EventLog()
    let responder = PairingResponder(
      policy: PairingPolicy(
        confirmation: .prompt { question in
          asked.withLock { $0.append(question) }
          switch question.request {
          case .requestPasskey: return .passkey(123_456)
          case .requestConfirmation(let passkey): return passkey == 1 ? .accept : nil
          default: return nil
          }
        }, allowedDevices: [Self.address]), events: log.record)
    #expect(try await responder.answer(.requestPasskey(device: Self.device)) == .passkey(123_456))
    #expect(
      try await responder.answer(.requestConfirmation(device: Self.device, passkey: 1)) == .accept)
    await #expect(throws: AgentRefusal.rejected("the user said no")) {
      try await responder.answer(.requestConfirmation(device: Self.device, passkey: 2))
    }
    // Off the list: refused without asking.
    await #expect(throws: AgentRefusal.self) {
      try await responder.answer(.requestConfirmation(device: Self.otherDevice, passkey: 1))
    }
    #expect(asked.withLock { $0.count } == 3)
    #expect(asked.withLock { $0.first?.address } == Self.address)
    #expect(
      log.events.map {
        switch $0 {
        case .accepted(_, let why): "accepted \(why)"
        case .refused(_, let why): "refused \(why)"
        default: "other"
        }
      } == ["accepted person", "accepted person", "refused personSaidNo", "refused notAllowed"])
  }

  @Test func cancelDropsThePendingPrompt() async throws {
    let started = AsyncStream.makeStream(of: Void.self)
    let responder = PairingResponder(
      policy: PairingPolicy(
        confirmation: .prompt { _ in
          started.continuation.yield()
          // Waits until cancelled, as a prompt with nobody at the terminal.
          try? await Task.sleep(for: .seconds(3600))
          return .accept
        }), events: { _ in })
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
      on: app, capability: .displayYesNo, policy: PairingPolicy(confirmation: .automatic),
      asDefault: true, callerCheck: BluetoothdCallerCheck(fixedOwner: bluetoothd.uniqueName))
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

    // From a cancelled task, as advertise unregisters after Ctrl-C: the call still goes out.
    let failure = await Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return await agent.unregister()
    }.value
    #expect(failure == nil)
    #expect(!agent.isRegistered)
    #expect(calls.withLock { $0.last } == "unregister")
    // Once unregistered, it cannot come back.
    await #expect(throws: BluetoothError.self) { try await agent.registerAgain() }
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
