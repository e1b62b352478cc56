// `blekit l2cap listen|connect`: a byte pipe between standard input/output and an L2CAP LE
// channel, as l2cat and nc users expect.

import ArgumentParsing
import BLEKit

/// The `l2cap` command group.
struct L2CAPCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "l2cap",
    abstract: "Pipe standard input/output over an L2CAP LE connection-oriented channel.",
    discussion: """
      The channel is the kernel's (an L2CAP socket, LE credit-based flow control); \
      bluetoothd only advertises, serves the PSM characteristic and makes the GATT link. \
      Standard input goes to the peer and what the peer sends goes to standard output, as \
      the kernel delivers it. The end of standard input sends what is left, waits until the \
      kernel has sent it, and closes the channel (L2CAP has no half-close); the peer closing \
      the channel ends the command with status 0 once everything it sent is written out. A \
      lost link exits 7. The pipe adds no framing; kernels with "Bluetooth: compute LE flow \
      credits based on recvbuf space" (Debian 12's 6.1.0-57 has it) can reorder or drop SDUs \
      once the receive queue has filled, so the receiving side watches the queue and exits 12 \
      (unverified) if it came near full (docs/l2cap.md). For a message that must arrive \
      exactly, use advertise --l2cap and receive --l2cap, which verify its length and CRC-32.
      """,
    subcommands: [L2CAPListenCommand.self, L2CAPConnectCommand.self]
  )

  init(parsing _: ParsedArguments<NoArguments>) {}
  func run() async throws {}
}

/// `blekit l2cap listen`: publish a channel, advertise, take one central's channel.
struct L2CAPListenCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "listen",
    abstract: "Publish an L2CAP channel, advertise it, and pipe the first central's channel.",
    discussion: """
      Publishes a PSM (the kernel's pick, 128-255, unless --psm), serves it in Apple's L2CAP \
      PSM characteristic (ABDD3056-28FA-441D-A470-55A75A52553A, in blekit's L2CAP service) \
      and advertises that service connectably, so `blekit l2cap connect ADDRESS` (or an \
      iPhone app) finds the PSM. One line on standard error says the adapter, its address and \
      the PSM. --secure accepts channels only on an encrypted link: an unpaired Linux central \
      is told "insufficient encryption" and pairs first (bluetoothd's agents decide).
      """
  )

  struct Arguments: ArgumentList {
    let adapter: Option<String> = .adapter(example: "hci1")
    let psm = Option<UInt16>("--psm", value: "N", help: "Listen on this PSM (1-255).")
    let secure = Flag("--secure", help: "Accept channels only on an encrypted (paired) link.")
    let receiveOnly = Flag(
      "--receive-only", short: "d", help: "Do not read standard input; end when the peer closes.")
    let timeout = Option<Duration>(
      "--timeout", short: "t", value: "SECONDS", help: "Give up waiting for a central (exit 6).")
  }

  let adapter: String?
  let psm: L2CAPPSM?
  let secure: Bool
  let receiveOnly: Bool
  let timeout: Duration?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    adapter = arguments.adapter
    psm = try parsePSM(arguments.psm)
    secure = arguments.secure
    receiveOnly = arguments.receiveOnly
    if let timeout = arguments.timeout, timeout <= .zero {
      throw .invalid("--timeout must be more than 0 seconds")
    }
    timeout = arguments.timeout
  }

  func run() async throws {
    let manager: PeripheralManager
    do {
      manager = try await PeripheralManager.open(adapter: adapter)
    } catch {
      throw exitError(error)
    }
    do {
      let listener = try await publishAndAdvertise(
        manager, psm: psm, secure: secure, what: "listening")
      let channel = try await firstChannel(listener, timeout: timeout)
      listener.close()
      if standardErrorIsTerminal {
        writeStandardError(
          "blekit: \(channel.peer) opened a channel (MTU \(channel.sendMTU) out, "
            + "\(channel.receiveMTU) in\(channel.isEncrypted ? ", encrypted" : ""))\n")
      }
      try await pipeStandardStreams(channel, receiveOnly: receiveOnly)
      channel.close()
    } catch {
      await manager.close()
      throw exitError(error)
    }
    await manager.close()
  }
}

/// Publishes a channel on `manager`'s adapter with its PSM characteristic and a connectable
/// advertisement of blekit's L2CAP service (or of `serviceUUIDs`); says so on standard error.
func publishAndAdvertise(
  _ manager: PeripheralManager, psm: L2CAPPSM?, secure: Bool, what: String,
  serviceUUIDs: [BluetoothUUID] = [BlekitUUID.l2capService]
) async throws -> L2CAPListener {
  let listener = try await manager.publishL2CAPChannel(psm: psm, requireEncryption: secure)
  do {
    try await manager.add(L2CAPPSMService(psm: listener.psm).service)
    try await manager.startAdvertising(
      AdvertisingPayload(discoverable: true, serviceUUIDs: serviceUUIDs))
  } catch {
    listener.close()
    throw error
  }
  writeStandardError(
    "blekit: \(what) on \(manager.adapterName) PSM \(listener.psm)"
      + (secure ? " (encrypted links only)" : "") + "\n")
  return listener
}

/// The first channel a listener yields, within `timeout` (nil: no limit).
func firstChannel(_ listener: L2CAPListener, timeout: Duration?) async throws -> L2CAPChannel {
  try await withThrowingTaskGroup(of: L2CAPChannel?.self) { group in
    group.addTask {
      for await channel in listener.channels { return channel }
      return nil
    }
    if let timeout {
      group.addTask {
        try await Task.sleep(for: timeout)
        throw CLIError(.timedOut, "no central opened a channel within \(timeout)")
      }
    }
    defer { group.cancelAll() }
    guard let channel = try await group.next() ?? nil else {
      throw CancellationError()
    }
    return channel
  }
}

/// `blekit l2cap connect ADDRESS`: open a channel to a peripheral and pipe it.
struct L2CAPConnectCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "connect",
    abstract: "Open an L2CAP channel to a peripheral and pipe standard input/output over it.",
    discussion: """
      Without --psm the PSM is read from the peripheral's L2CAP PSM characteristic (Apple's, \
      ABDD3056-28FA-441D-A470-55A75A52553A) over a GATT connection; with --psm the kernel \
      connects directly. A PSM nobody listens on exits 10, a peripheral without the PSM \
      characteristic exits 10. --secure encrypts the link first (pairing if needed).
      """
  )

  struct Arguments: ArgumentList {
    let address = Argument<String>("ADDRESS|NAME", help: "The peripheral.")
    let adapter: Option<String> = .adapter()
    let psm = Option<UInt16>("--psm", value: "N", help: "Connect to this PSM (1-255).")
    let secure = Flag("--secure", help: "Encrypt the link before opening the channel.")
    let receiveOnly = Flag(
      "--receive-only", short: "d", help: "Do not read standard input; end when the peer closes.")
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(30),
      help: "Give up finding and connecting after this long (default 30).")
  }

  let target: PeripheralTarget
  let adapter: String?
  let psm: L2CAPPSM?
  let secure: Bool
  let receiveOnly: Bool
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.address)
    adapter = arguments.adapter
    psm = try parsePSM(arguments.psm)
    secure = arguments.secure
    receiveOnly = arguments.receiveOnly
    guard arguments.timeout > .zero else { throw .invalid("--timeout must be more than 0 seconds") }
    timeout = arguments.timeout
  }

  func run() async throws {
    let manager = try await openPoweredCentral(adapter: adapter)
    var connected: Peripheral?
    do {
      let (channel, peripheral) = try await openChannel(
        manager, target: target, psm: psm, secure: secure, timeout: timeout)
      connected = peripheral
      if standardErrorIsTerminal {
        writeStandardError(
          "blekit: channel open to \(channel.peer) PSM \(channel.psm) (MTU \(channel.sendMTU) "
            + "out, \(channel.receiveMTU) in\(channel.isEncrypted ? ", encrypted" : ""))\n")
      }
      try await pipeStandardStreams(channel, receiveOnly: receiveOnly)
      channel.close()
    } catch {
      await connected?.disconnectOnExit()
      await manager.close()
      throw exitError(error)
    }
    await connected?.disconnectOnExit()
    await manager.close()
  }
}

/// Finds the peripheral, learns the PSM (the characteristic, unless given) and opens the
/// channel. Returns the GATT connection made for the PSM, if any, to disconnect at the end.
func openChannel(
  _ manager: CentralManager, target: PeripheralTarget, psm: L2CAPPSM?, secure: Bool,
  timeout: Duration
) async throws -> (L2CAPChannel, Peripheral?) {
  let deadline = ContinuousClock.now + timeout
  let identifier = try await manager.find(target, timeout: timeout)
  if let psm {
    let channel = try await manager.openL2CAPChannel(
      to: identifier, psm: psm, requireEncryption: secure,
      timeout: max(deadline - .now, .seconds(1)))
    return (channel, nil)
  }
  let peripheral = try await manager.connect(
    to: identifier, timeout: max(deadline - .now, .seconds(1)))
  do {
    guard let found = try await peripheral.l2capPSM() else {
      throw CLIError(
        .notFound,
        "\(identifier) serves no L2CAP PSM characteristic (ABDD3056-28FA-441D-A470-55A75A52553A); "
          + "give --psm")
    }
    let channel = try await peripheral.openL2CAPChannel(
      found, requireEncryption: secure, timeout: max(deadline - .now, .seconds(1)))
    return (channel, peripheral)
  } catch {
    await peripheral.disconnectOnExit()
    throw error
  }
}
