// `blekit serve PROFILE.json`: publish and advertise the GATT profile a JSON file describes,
// print what centrals write, push notifications from timers or standard input.

import ArgumentParsing
import BLEKit
import JSON

#if canImport(Glibc)
  import Glibc
#endif

/// Serves a declarative GATT profile (docs/serve.md) until Ctrl-C or `--timeout`.
struct ServeCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "serve",
    abstract: "Publish and advertise the GATT profile a JSON file describes.",
    discussion: """
      Reads PROFILE (JSON: services, characteristics with properties and permissions, \
      descriptors, and where values come from; see docs/serve.md and the bundled profiles), \
      checks all of it, then registers its services and advertises. A bad profile exits 2 \
      before anything is registered, with one line naming the file, the place inside it \
      (e.g. services[0].characteristics[1].uuid) and the reason; --check stops there. Values \
      are fixed, read from a file or produced by a shell command at each read, or counters; \
      notifications and indications are pushed every N seconds or one per line of standard \
      input. Each write a central makes is printed on standard output as a line (text where \
      printable, else hex; --hex always hex), or its bytes as they are for a characteristic \
      whose writes go to stdout (a UART bridge). --json prints every event (connections, \
      subscriptions, reads, writes, with the central's address, MTU and link) as one JSON \
      object per line instead; status lines otherwise go to standard error. Ctrl-C, SIGTERM \
      or --timeout unregisters everything and exits 0. When standard output is read so \
      slowly that \(PeripheralManager.eventLimit) events wait unprinted, later writes are accepted but not printed; \
      a last line counts them, and serve then exits 13.
      """
  )

  struct Arguments: ArgumentList {
    let profile = Argument<String>("PROFILE", help: "The profile, a JSON file.")
    let adapter: Option<String> = .adapter(example: "hci1")
    let json = Flag("--json", help: "Print every event as one JSON object per line.")
    let hex = Flag("--hex", help: "Print written values as hex, never as text.")
    let check = Flag("--check", help: "Check the profile, print its outline, register nothing.")
    let timeout = Option<Duration>(
      "--timeout", value: "SECONDS", help: "Stop serving after this long (exit 0).")
  }

  let profilePath: String
  let adapter: String?
  let output: ServeOutput
  let checkOnly: Bool
  let timeout: Duration?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    profilePath = arguments.profile
    adapter = arguments.adapter
    if arguments.json && arguments.hex {
      throw .invalid("--json prints both hex and text: drop --hex")
    }
    output = ServeOutput(json: arguments.json, hex: arguments.hex)
    checkOnly = arguments.check
    if let timeout = arguments.timeout, timeout <= .zero {
      throw .invalid("--timeout must be more than 0 seconds")
    }
    timeout = arguments.timeout
  }

  /// 1 MiB: a profile describes a few services; more is not a profile.
  static let maximumProfileLength = 1 << 20

  /// Reads and checks the profile file (exit 2 on any mistake).
  static func load(_ path: String) throws(ProfileError) -> ServeProfile {
    let bytes: [UInt8]
    do {
      bytes = try ServeValueProducer.read(path, limit: maximumProfileLength)
    } catch {
      throw ProfileError(file: path, path: "", reason: error.description)
    }
    guard bytes.count <= maximumProfileLength else {
      throw ProfileError(
        file: path, path: "", reason: "the file is larger than \(maximumProfileLength) bytes")
    }
    return try ServeProfile.decode(bytes, file: path)
  }

  func run() async throws {
    let profile = try Self.load(profilePath)
    if checkOnly {
      printLine(Self.outline(profile, file: profilePath))
      return
    }
    let runtime = ServeRuntime(profile, output: output)
    let manager: PeripheralManager
    do {
      manager = try await PeripheralManager.open(adapter: adapter)
    } catch {
      throw exitError(error)
    }
    var tasks: [Task<Void, Never>] = []
    do {
      for service in runtime.services { try await manager.add(service) }
      // Followed before advertising: a central waiting for the advertisement connects at once.
      let links = try await manager.connectionEvents()
      tasks.append(
        Task { [output] in await Self.report(links, output: output, runtime: runtime) })
      try await manager.startAdvertising(profile.advertisement.payload)
    } catch {
      await manager.close()
      throw exitError(error)
    }
    output.status(
      "serving",
      "serving \(profilePath) on \(manager.adapterName): \(profile.services.count) services, "
        + "advertising \(profile.advertisement.services.map(\.shortString).joined(separator: ", "))",
      fields: [
        .init("adapter", .string(manager.adapterName)),
        .init("services", .array(profile.services.map { .string($0.uuid.shortString) })),
      ])
    if let (fed, format) = runtime.standardInputFed {
      tasks.append(
        Task { [output] in
          await Self.feed(fed, format: format, manager: manager, output: output)
        })
    }
    if let timeout {
      tasks.append(
        Task {
          try? await Task.sleep(for: timeout)
          guard !Task.isCancelled else { return }
          await manager.close()
        })
    }
    await serve(runtime, manager: manager)
    for task in tasks { task.cancel() }
    await manager.close()
    if let line = Self.droppedWritesLine(manager) { throw droppedValuesError(line) }
  }

  /// The line for centrals' writes that were refused or not printed because the events waited
  /// unprinted (``PeripheralManager/eventLimit``), if there were any.
  static func droppedWritesLine(_ manager: PeripheralManager) -> String? {
    let refused = manager.refusedWrites
    let dropped = manager.droppedWriteEvents
    guard refused + dropped > 0 else { return nil }
    var parts: [String] = []
    if dropped > 0 { parts.append("\(dropped) writes were accepted but not printed") }
    if refused > 0 { parts.append("\(refused) write requests were refused (ATT error)") }
    return parts.joined(separator: ", ") + ": standard output was not read fast enough "
      + "(\(PeripheralManager.eventLimit) events waited unprinted)"
  }

  /// Handles the manager's events until it closes or the command is cancelled.
  private func serve(_ runtime: ServeRuntime, manager: PeripheralManager) async {
    var pushers: [ObjectIdentifier: Task<Void, Never>] = [:]
    for await event in manager.events {
      switch event {
      case .subscribed(let central, let characteristic):
        guard let served = runtime.served(characteristic) else { continue }
        output.status(
          "subscribed",
          "\(central?.description ?? "a central") subscribed to \(served.profile.uuid.shortString)",
          fields: [
            .init("characteristic", .string(served.profile.uuid.shortString)),
            .init("central", central.map { .string($0.description) } ?? .null),
          ])
        if let pushes = served.pushes, case .periodic(let interval, _) = served.profile.notifier {
          pushers[ObjectIdentifier(characteristic)]?.cancel()
          pushers[ObjectIdentifier(characteristic)] = Task { [output] in
            await Self.push(
              pushes, every: interval, to: served, manager: manager, output: output)
          }
        }
      case .unsubscribed(let central, let characteristic):
        // With one notify socket per central (BlueZ 5.69 and later) this is one central of
        // several leaving: the values go on while anyone is still subscribed.
        if !manager.subscribers(of: characteristic).isSubscribed {
          pushers.removeValue(forKey: ObjectIdentifier(characteristic))?.cancel()
        }
        guard let served = runtime.served(characteristic) else { continue }
        output.status(
          "unsubscribed",
          "\(central?.description ?? "the last central") unsubscribed from "
            + served.profile.uuid.shortString,
          fields: [
            .init("characteristic", .string(served.profile.uuid.shortString)),
            .init("central", central.map { .string($0.description) } ?? .null),
          ])
      case .write(let request):
        guard
          let served = runtime.characteristics.first(where: {
            $0.profile.uuid == request.characteristic
          })
        else { continue }
        output.write(request, service: served.service, to: served.profile.writes)
      case .readyToUpdate:
        continue
      case .advertisingStopped:
        output.status("advertising-stopped", "bluetoothd stopped the advertisement")
      case .advertisingPaused(let reason):
        output.status(
          "advertising-paused",
          "advertising paused while a central is connected (\(reason)); other centrals can "
            + "connect once it leaves",
          fields: [.init("reason", .string(reason))])
      }
    }
    for pusher in pushers.values { pusher.cancel() }
  }

  /// Pushes one value every `interval` while someone is subscribed.
  private static func push(
    _ producer: ServeValueProducer, every interval: Duration, to served: ServedCharacteristic,
    manager: PeripheralManager, output: ServeOutput
  ) async {
    while !Task.isCancelled {
      do {
        let value = try await producer.produce()
        try await deliver(value, to: served, manager: manager, output: output)
      } catch let error as ServeValueError {
        writeStandardError("blekit serve: \(served.profile.path).notifier: \(error)\n")
      } catch let error as BluetoothError where error.code == .notSubscribed {
        return
      } catch let error as BluetoothError where error.code == .closed {
        return
      } catch {
        writeStandardError("blekit serve: \(served.profile.path).notifier: \(error)\n")
      }
      try? await Task.sleep(for: interval)
    }
  }

  /// Sends one value per line of standard input (cut at the notification size when longer).
  private static func feed(
    _ served: ServedCharacteristic, format: ServeProfile.LineFormat,
    manager: PeripheralManager, output: ServeOutput
  ) async {
    var pending: [UInt8] = []
    do {
      for try await chunk in StandardInputChunks() {
        pending += chunk
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
          let line = Array(pending[..<newline])
          pending.removeSubrange(...newline)
          await send(line, format: format, to: served, manager: manager, output: output)
        }
      }
      if !pending.isEmpty {
        await send(pending, format: format, to: served, manager: manager, output: output)
      }
    } catch {
      writeStandardError("blekit serve: \(error)\n")
    }
    output.status("stdin-closed", "standard input ended; still serving")
  }

  private static func send(
    _ line: [UInt8], format: ServeProfile.LineFormat, to served: ServedCharacteristic,
    manager: PeripheralManager, output: ServeOutput
  ) async {
    var value = line.last == UInt8(ascii: "\r") ? Array(line.dropLast()) : line
    if format == .hex {
      do {
        value = try HexBytes.parse(String(decoding: value, as: UTF8.self))
      } catch {
        writeStandardError("blekit serve: standard input: \(error.description); line skipped\n")
        return
      }
    }
    guard !value.isEmpty else { return }
    let size = max(1, manager.maximumUpdateValueLength(for: served.characteristic))
    var offset = 0
    while offset < value.count {
      let piece = Array(value[offset..<min(offset + size, value.count)])
      offset += piece.count
      do {
        try await deliver(piece, to: served, manager: manager, output: output)
      } catch {
        let reason =
          error.code == .notSubscribed
          ? "no central is subscribed to \(served.profile.uuid.shortString)" : error.message
        writeStandardError("blekit serve: \(reason); line dropped\n")
        return
      }
    }
  }

  /// Notifies `value`, or indicates it and waits for the confirmation when the
  /// characteristic indicates and does not notify; reports it either way.
  private static func deliver(
    _ value: [UInt8], to served: ServedCharacteristic, manager: PeripheralManager,
    output: ServeOutput
  ) async throws(BluetoothError) {
    let uuid = served.profile.uuid.shortString
    let fields: [JSONValue.Field] = [
      .init("characteristic", .string(uuid)), .init("hex", .string(HexBytes.format(value))),
    ]
    let properties = served.characteristic.properties
    if properties.contains(.indicate) && !properties.contains(.notify) {
      let start = ContinuousClock.now
      try await manager.indicate(value, for: served.characteristic)
      let took = ContinuousClock.now - start
      let milliseconds =
        Int(took.components.seconds * 1000)
        + Int(took.components.attoseconds / 1_000_000_000_000_000)
      output.status(
        "confirmed", "indicated \(HexBytes.format(value)) on \(uuid): confirmed",
        fields: fields + [.init("milliseconds", .int(milliseconds))])
    } else {
      try await manager.send(value, for: served.characteristic)
      output.status("notified", "sent \(HexBytes.format(value)) on \(uuid)", fields: fields)
    }
  }

  /// Reports centrals connecting and leaving.
  static func report(
    _ links: AsyncStream<CentralConnectionEvent>, output: ServeOutput, runtime: ServeRuntime
  ) async {
    for await link in links {
      switch link {
      case .connected(let central):
        output.status(
          "connected", "\(central) connected",
          fields: [.init("central", .string(central.description))])
      case .disconnected(let central):
        runtime.forget(central.identifier)
        output.status(
          "disconnected", "\(central) disconnected",
          fields: [.init("central", .string(central.description))])
      }
    }
  }

  /// `--check`'s outline: one line per service and characteristic.
  static func outline(_ profile: ServeProfile, file: String) -> String {
    var lines = [
      "\(file): ok, \(profile.services.count) service\(profile.services.count == 1 ? "" : "s")"
    ]
    for service in profile.services {
      lines.append("service \(service.uuid.shortString)\(service.primary ? "" : " (secondary)")")
      for characteristic in service.characteristics {
        let properties = ServeProfile.propertyNames(characteristic.properties)
        let refused = characteristic.readError.map { ", reads refused: \($0.name)" } ?? ""
        lines.append("  characteristic \(characteristic.uuid.shortString) \(properties)\(refused)")
      }
    }
    let advertised = profile.advertisement.services.map(\.shortString).joined(separator: ", ")
    lines.append(
      "advertise \(advertised)"
        + (profile.advertisement.name.map { " as \(JSONValue.quoted($0))" } ?? ""))
    return lines.joined(separator: "\n")
  }
}

extension ServeProfile {
  /// The properties as the profile spells them, comma-separated.
  static func propertyNames(_ properties: CharacteristicProperties) -> String {
    let names: [(String, CharacteristicProperties)] = [
      ("read", .read), ("write", .write), ("write-without-response", .writeWithoutResponse),
      ("notify", .notify), ("indicate", .indicate),
    ]
    return names.filter { properties.contains($0.1) }.map(\.0).joined(separator: ",")
  }
}
