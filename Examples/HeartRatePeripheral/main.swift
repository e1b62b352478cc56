/// A Heart Rate sensor as a GATT server: the Heart Rate service (0x180D) with Heart Rate
/// Measurement (0x2A37, notify) and Body Sensor Location (0x2A38, read: chest), and the Device
/// Information service (0x180A) with Manufacturer Name (0x2A29).
///
///     swift run example-heart-rate-peripheral [--adapter hci1] [--count 5]
///
/// It advertises 0x180D and sends one measurement a second to a subscribed central: 60 bpm,
/// then 61, 62, ... It prints centrals connecting and leaving and each value it sends, and
/// exits once `--count` values have gone out and the central has unsubscribed (`--count 0`:
/// never). Ctrl-C unregisters everything and exits. Pair it with `example-heart-rate-central`
/// on another adapter or machine.
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
let adapter = option("--adapter") ?? "hci1"
let count = option("--count").flatMap { Int($0) } ?? 5

let measurement = MutableCharacteristic(
  type: BluetoothUUID(uint16: 0x2A37), properties: [.notify], permissions: [.readable])
let location = MutableCharacteristic(
  type: BluetoothUUID(uint16: 0x2A38), properties: [.read], value: [0x01],  // 1: chest
  permissions: [.readable])
let heartRate = MutableService(
  type: BluetoothUUID(uint16: 0x180D), characteristics: [measurement, location])
let deviceInformation = MutableService(
  type: BluetoothUUID(uint16: 0x180A),
  characteristics: [
    MutableCharacteristic(
      type: BluetoothUUID(uint16: 0x2A29), properties: [.read], value: Array("blekit".utf8),
      permissions: [.readable])
  ])

let manager: PeripheralManager
do {
  manager = try await PeripheralManager.open(adapter: adapter)
} catch {
  say("cannot open \(adapter): \(error)", to: 2)
  exit(1)
}

// Centrals coming and going, as bluetoothd sees their links. The stream is opened before
// advertising starts: a central already connected when it opens is reported only when it leaves.
let linkEvents: AsyncStream<CentralConnectionEvent>
do {
  linkEvents = try await manager.connectionEvents()
} catch {
  say("cannot follow connections on \(adapter): \(error)", to: 2)
  exit(1)
}
let links = Task {
  for await event in linkEvents {
    switch event {
    case .connected(let central): say("central \(central.address ?? "?") connected")
    case .disconnected(let central): say("central \(central.address ?? "?") disconnected")
    }
  }
}

let work = Task {
  try await manager.add(heartRate)
  try await manager.add(deviceInformation)
  try await manager.startAdvertising(
    AdvertisingPayload(discoverable: true, serviceUUIDs: [heartRate.uuid], localName: "blekit HR"))
  say("advertising the Heart Rate service on \(adapter)")
  var sent = 0
  events: for await event in manager.events {
    switch event {
    case .subscribed(let central, let characteristic) where characteristic === measurement:
      say("\(central?.description ?? "a central") subscribed")
      while count == 0 || sent < count {
        let bpm = UInt8(truncatingIfNeeded: 60 + sent)
        do {
          // Flags 0x00: the value is one byte of beats per minute.
          try await manager.send([0x00, bpm], for: measurement)
        } catch BluetoothError.Code.notSubscribed {
          break
        }
        say("sent \(bpm) bpm")
        sent += 1
        try await Task.sleep(for: .seconds(1))
      }
    case .unsubscribed(_, let characteristic) where characteristic === measurement:
      say("unsubscribed")
      if count > 0 && sent >= count { break events }
    default:
      continue
    }
  }
}

// Ctrl-C cancels the work; close() below then unregisters the services and the advertisement.
// The handler runs on the main queue: written in top-level code, it belongs to the main actor.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler { [work] in work.cancel() }
interrupt.resume()

let result = await work.result
links.cancel()
await manager.close()
if work.isCancelled { exit(130) }
if case .failure(let error) = result {
  say("error: \(error)", to: 2)
  exit(1)
}
