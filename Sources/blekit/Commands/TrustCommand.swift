// `blekit trust ADDRESS`: mark a device trusted (or, with --revoke, no longer trusted).

import ArgumentParsing
import BLEKit

/// Sets `Device1.Trusted`.
struct TrustCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "trust",
    abstract: "Mark a device trusted, so it connects without asking the agent.",
    discussion: """
      Sets the device's Trusted property; --revoke clears it. bluetoothd must know the \
      device: if it does not, blekit scans for it until --timeout.
      """
  )

  struct Arguments: ArgumentList {
    let address = Argument<String>("ADDRESS", help: "The device's address.")
    let adapter: Option<String> = .adapter()
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(10),
      help: "Give up finding the device after this long.")
    let revoke = Flag("--revoke", help: "Clear Trusted instead of setting it.")
  }

  let address: BluetoothAddress
  let adapter: String?
  let timeout: Duration
  let revoke: Bool

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    guard let address = BluetoothAddress(rawValue: arguments.address) else {
      throw .invalid("'\(arguments.address)' is not a Bluetooth address (XX:XX:XX:XX:XX:XX)")
    }
    self.address = address
    adapter = arguments.adapter
    guard arguments.timeout > .zero else { throw .invalid("--timeout must be more than 0 seconds") }
    timeout = arguments.timeout
    revoke = arguments.revoke
  }

  func run() async throws {
    let manager = try await openPoweredCentral(adapter: adapter)
    do {
      let peripheral = try await manager.find(.address(address), timeout: timeout)
      try await manager.setTrusted(!revoke, for: peripheral)
      let state = try await manager.pairingState(of: peripheral)
      printLine("\(address): " + PairCommand.describe(state))
    } catch {
      await manager.close()
      throw exitError(error)
    }
    await manager.close()
  }
}
