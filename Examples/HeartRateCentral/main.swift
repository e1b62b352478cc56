/// A Heart Rate monitor as a GATT client: finds a peripheral advertising the Heart Rate service
/// (0x180D), connects, reads Body Sensor Location (0x2A38), subscribes to Heart Rate
/// Measurement (0x2A37), prints `--count` values and disconnects.
///
///     swift run example-heart-rate-central [--adapter hci0] [--count 5] [--timeout 30]
///
/// `--timeout` bounds the whole run in seconds. Ctrl-C unsubscribes, disconnects and exits.
/// Pair it with `example-heart-rate-peripheral` on another adapter or machine.
import BLEKit
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

/// The value after `name` on the command line, if given.
func option(_ name: String) -> String? {
  let arguments = CommandLine.arguments
  guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
  return arguments[index + 1]
}
/// Writes a line to standard output (or standard error, fd 2) at once, even on a file or pipe.
func say(_ line: String, to fd: Int32 = 1) {
  var text = line + "\n"
  text.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}
let adapter = option("--adapter") ?? "hci0"
let count = option("--count").flatMap { Int($0) } ?? 5
let timeout = option("--timeout").flatMap { Int($0) } ?? 30

let heartRateService = BluetoothUUID(uint16: 0x180D)
let measurementUUID = BluetoothUUID(uint16: 0x2A37)
let locationUUID = BluetoothUUID(uint16: 0x2A38)
let locations = ["other", "chest", "wrist", "finger", "hand", "ear lobe", "foot"]

let work = Task {
  let central = try await CentralManager.open(adapter: adapter)
  try await central.waitUntilPoweredOn(timeout: .seconds(5))
  // bluetoothd keeps the services of a device's last connection in place of those it
  // advertises now; forgetting the idle devices it caches lets the service filter see them.
  await central.removeCachedPeripherals()

  say("scanning for the Heart Rate service on \(adapter)")
  var found: Discovery?
  for try await discovery in try await central.scan(ScanOptions(services: [heartRateService])) {
    found = discovery
    break  // ending the iteration stops the scan
  }
  guard let found else { return }
  say("found \(found.address) \(found.name ?? "")")

  let peripheral = try await central.connect(to: found.peripheral, timeout: .seconds(20))
  do {
    guard let service = try await peripheral.services([heartRateService]).first else {
      throw BluetoothError(.attributeNotFound, "\(found.address) has no Heart Rate service")
    }
    let characteristics = try await peripheral.characteristics(
      [measurementUUID, locationUUID], for: service)
    if let location = characteristics.first(where: { $0.uuid == locationUUID }),
      let value = try await peripheral.readValue(for: location).first
    {
      let name = locations.indices.contains(Int(value)) ? locations[Int(value)] : "unknown"
      say("body sensor location: \(name) (\(value))")
    }
    guard let measurement = characteristics.first(where: { $0.uuid == measurementUUID }) else {
      throw BluetoothError(.attributeNotFound, "\(found.address) has no Heart Rate Measurement")
    }
    let notifications = try await peripheral.notifications(for: measurement)
    var received = 0
    for try await value in notifications where value.count >= 2 {
      // Bit 0 of the flags: the beats per minute are one byte (0) or two, little-endian (1).
      let bpm =
        value[0] & 1 == 0 || value.count < 3 ? Int(value[1]) : Int(value[1]) | Int(value[2]) << 8
      say("heart rate \(bpm) bpm")
      received += 1
      if received == count { break }
    }
    await notifications.stop()
  } catch {
    await peripheral.disconnectOnExit()
    throw error
  }
  // Also when cancelled by Ctrl-C or the timeout: disconnectOnExit() still disconnects.
  await peripheral.disconnectOnExit()
  say("disconnected")
}

// Ctrl-C or the timeout cancels the work, which then unsubscribes and disconnects.
// The handler runs on the main queue: written in top-level code, it belongs to the main actor.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler { [work] in work.cancel() }
interrupt.resume()
let timer = Task { [work] in
  try await Task.sleep(for: .seconds(timeout))
  work.cancel()
}

let result = await work.result
timer.cancel()
if (try? await timer.value) != nil {
  say("timed out: fewer than \(count) values within \(timeout) s", to: 2)
  exit(1)
}
if work.isCancelled { exit(130) }
if case .failure(let error) = result {
  say("error: \(error)", to: 2)
  exit(1)
}
