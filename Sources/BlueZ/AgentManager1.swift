// Proxy for org.bluez.AgentManager1: registers a pairing agent and makes it the default one.
import DBus

/// What a pairing agent can show and take in, as BlueZ spells it (`RegisterAgent`'s second
/// argument). bluetoothd derives the controller's IO capability, and so the pairing method,
/// from it.
public enum AgentCapability: String, Sendable, Hashable, CaseIterable {
  /// Can show a passkey, cannot take input.
  case displayOnly = "DisplayOnly"
  /// Can show a passkey and take a yes or no (numeric comparison).
  case displayYesNo = "DisplayYesNo"
  /// Can take a passkey, cannot show one.
  case keyboardOnly = "KeyboardOnly"
  /// Neither shows nor takes anything: "just works" pairing, no MITM protection.
  case noInputNoOutput = "NoInputNoOutput"
  /// Can show a passkey and take one.
  case keyboardDisplay = "KeyboardDisplay"
}

/// bluetoothd's agent manager (`org.bluez.AgentManager1` at `/org/bluez`).
///
/// See BlueZ's `doc/org.bluez.AgentManager.rst`. Each bus connection can register one agent;
/// bluetoothd then asks that agent about the pairings this connection starts. The default
/// agent answers the pairings nobody on the bus started (a central pairing with us).
public struct AgentManager1: Sendable {
  /// The D-Bus interface this proxy calls.
  public static let interface = BlueZ.Interface.agentManager
  /// The object that implements it.
  public static let path: ObjectPath = "/org/bluez"

  public let connection: DBusConnection

  public init(connection: DBusConnection) {
    self.connection = connection
  }

  /// Registers the `org.bluez.Agent1` object at `agent` (exported on this connection).
  /// The corresponding D-Bus member is `org.bluez.AgentManager1.RegisterAgent`.
  /// - Throws: `AlreadyExists` when this connection already has an agent.
  public func registerAgent(_ agent: ObjectPath, capability: AgentCapability)
    async throws(BlueZError)
  {
    try await call("RegisterAgent", [.objectPath(agent), .string(capability.rawValue)])
  }

  /// Unregisters the agent at `agent`.
  /// The corresponding D-Bus member is `org.bluez.AgentManager1.UnregisterAgent`.
  public func unregisterAgent(_ agent: ObjectPath) async throws(BlueZError) {
    try await call("UnregisterAgent", [.objectPath(agent)])
  }

  /// Makes the registered agent at `agent` the default agent (asked about incoming pairings).
  /// The corresponding D-Bus member is `org.bluez.AgentManager1.RequestDefaultAgent`.
  public func requestDefaultAgent(_ agent: ObjectPath) async throws(BlueZError) {
    try await call("RequestDefaultAgent", [.objectPath(agent)])
  }

  private func call(_ member: MemberName, _ arguments: [DBusValue]) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: Self.path, interface: Self.interface, member: member,
        arguments: arguments)
    } catch {
      throw BlueZError(error)
    }
  }
}
