import BlueZ
import DBus
import Testing

// org.bluez.Agent1's messages: bluetoothd's questions decoded from their arguments, and the
// reply arguments for each answer (or a refusal when the answer does not fit the question).

@Suite struct Agent1MessageTests {
  static let device: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_42"

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
}
