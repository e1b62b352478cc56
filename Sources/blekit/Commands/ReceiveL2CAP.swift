// `blekit receive --l2cap`: the message over an L2CAP channel whose PSM the peripheral serves
// in Apple's PSM characteristic; printed only once its length and CRC-32 are verified.

import ArgumentParsing
import BLEKit
import JSON

extension ReceiveCommand {
  /// Finds the transfer peripheral (or --from), connects, reads its PSM characteristic, opens
  /// the channel, receives one framed message, acknowledges it and prints it.
  func receiveL2CAP(_ manager: CentralManager) async throws {
    let deadline = ContinuousClock.now + timeout
    let peer: PeripheralIdentifier
    do {
      if let from {
        peer = try await manager.find(from, timeout: timeout)
      } else {
        peer = try await TransferCentral(manager: manager).findPeer(rssi: rssi, timeout: timeout)
          .peripheral
      }
    } catch {
      throw exitError(error)
    }
    let peripheral: Peripheral
    do {
      peripheral = try await manager.connect(to: peer, timeout: max(deadline - .now, .seconds(1)))
    } catch {
      throw exitError(error)
    }
    let progress = ProgressLine(verb: "received")
    let message: [UInt8]
    var duration = Duration.zero
    var mtus = (send: 0, receive: 0)
    do {
      guard let psm = try await peripheral.l2capPSM() else {
        throw CLIError(
          .notFound,
          "\(peer) serves no L2CAP PSM characteristic (ABDD3056-28FA-441D-A470-55A75A52553A); "
            + "is it running advertise --l2cap?")
      }
      let channel = try await peripheral.openL2CAPChannel(
        psm, timeout: max(deadline - .now, .seconds(1)))
      defer { channel.close() }
      mtus = (channel.sendMTU, channel.receiveMTU)
      let began = ContinuousClock.now
      do {
        message = try await L2CAPMessageTransfer.receive(
          over: channel, limit: TransferReassembler.defaultMaximumMessageLength,
          deadlines: deadlines
        ) { received, total in
          progress.update(received, of: total)
        }
      } catch {
        throw exitError(error, note: "nothing was printed")
      }
      duration = ContinuousClock.now - began
      progress.finish()
      // The acknowledgement must leave before the channel closes.
      await channel.drain(timeout: .seconds(10))
    } catch {
      progress.finish()
      await peripheral.disconnectOnExit()
      throw exitError(error)
    }
    await peripheral.disconnectOnExit()
    if json {
      try StandardOutput.write(
        Array(
          (JSONValue.object([
            .init(
              "message",
              .string(String(validating: message, as: UTF8.self) ?? Base64.encode(message))
            ),
            .init(
              "encoding",
              .string(String(validating: message, as: UTF8.self) == nil ? "base64" : "utf-8")
            ),
            .init("bytes", .int(message.count)),
            .init("peer", .string(peer.address.rawValue)),
            .init("framing", .string("l2cap")),
            .init("seconds", .number(seconds(duration))),
            .init(
              "bytesPerSecond",
              .number(Double(message.count) / max(seconds(duration), 0.001))
            ),
            .init("sendMTU", .int(mtus.send)),
            .init("receiveMTU", .int(mtus.receive)),
          ]).text + "\n").utf8))
    } else if nul {
      guard !message.contains(0) else {
        throw CLIError(
          .failure,
          "the message (\(message.count) bytes) contains a NUL byte, which --null cannot keep "
            + "apart; use --json")
      }
      try StandardOutput.write(message + [0])
    } else {
      try StandardOutput.writePeerBytes(message)
    }
  }
}
