// `blekit unpair ADDRESS`: forget a device and its keys.

import ArgumentParsing
import BLEKit

/// Removes a device and its bonding (`Adapter1.RemoveDevice`).
struct UnpairCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "unpair",
    abstract: "Remove a device and its pairing keys.",
    discussion: """
      Asks bluetoothd to remove the device (Adapter1.RemoveDevice): its keys are deleted, it \
      is disconnected if connected, and bluetoothd forgets it until it is discovered again. \
      A device bluetoothd does not know is already unpaired: that is reported on standard \
      error and the command succeeds.
      """
  )

  struct Arguments: ArgumentList {
    let address = Argument<String>("ADDRESS", help: "The device's address.")
    let adapter: Option<String> = .adapter()
  }

  let address: BluetoothAddress
  let adapter: String?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    guard let address = BluetoothAddress(rawValue: arguments.address) else {
      throw .invalid("'\(arguments.address)' is not a Bluetooth address (XX:XX:XX:XX:XX:XX)")
    }
    self.address = address
    adapter = arguments.adapter
  }

  func run() async throws {
    let manager = try await openPoweredCentral(adapter: adapter)
    do {
      guard let peripheral = await manager.peripheral(address: address) else {
        writeStandardError(
          "blekit: \(address) is not known to bluetoothd on \(await manager.adapterName); "
            + "nothing to unpair\n")
        await manager.close()
        return
      }
      let state = try await manager.pairingState(of: peripheral)
      try await manager.unpair(peripheral)
      printLine("removed \(address)" + (state.paired ? " and its keys" : " (it was not paired)"))
    } catch {
      await manager.close()
      throw exitError(error)
    }
    await manager.close()
  }
}
