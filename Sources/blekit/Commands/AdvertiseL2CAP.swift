// `blekit advertise --l2cap`: the message over an L2CAP channel instead of notifications,
// in blekit's framing (length + CRC-32, acknowledged by the receiver).

import ArgumentParsing
import BLEKit

extension AdvertiseCommand {
  /// Publishes an L2CAP channel and its PSM characteristic, advertises the transfer service's
  /// UUID (so `receive --l2cap` finds it as it finds any transfer peripheral), and sends
  /// `bytes` to every central that opens a channel, one at a time, until --once is satisfied,
  /// --timeout passes, or Ctrl-C. The GATT transfer service itself is not served: a central
  /// that looks for it (receive without --l2cap) is told it is absent.
  func runL2CAP(_ bytes: [UInt8]) async throws {
    let manager: PeripheralManager
    do {
      manager = try await PeripheralManager.open(adapter: adapter)
    } catch {
      throw exitError(error)
    }
    var agent: PairingAgent?
    var sends = 0
    do {
      if let pairing { agent = try await registerPairableAgent(manager, policy: pairing) }
      let listener = try await publishAndAdvertise(
        manager, psm: nil, secure: secure, what: "advertising the message over L2CAP",
        serviceUUIDs: payload.serviceUUIDs)
      sends = try await serveChannels(listener, message: bytes)
      listener.close()
    } catch {
      await agent?.unregister()
      await manager.close()
      throw exitError(error)
    }
    await agent?.unregister()
    await manager.close()
    if Task.isCancelled { throw CancellationError() }
    if sends == 0 { throw CLIError(.timedOut, "no central received the message in time") }
  }

  /// Sends the message on each incoming channel; returns how many sends were confirmed.
  private func serveChannels(_ listener: L2CAPListener, message: [UInt8]) async throws -> Int {
    let timer = timeout.map { limit in
      Task {
        try? await Task.sleep(for: limit)
        if !Task.isCancelled { listener.close() }
      }
    }
    defer { timer?.cancel() }
    var sends = 0
    for await channel in listener.channels {
      let progress = ProgressLine(verb: "sent")
      let start = ContinuousClock.now
      do {
        try await L2CAPMessageTransfer.send(message, over: channel, deadlines: deadlines) {
          sent, total in
          progress.update(sent, of: total)
        }
        progress.finish()
        sends += 1
        if standardErrorIsTerminal {
          writeStandardError(
            "blekit: sent \(message.count) bytes to \(channel.peer) over L2CAP in "
              + "\(seconds(ContinuousClock.now - start)) s\n")
        }
      } catch {
        progress.finish()
        writeStandardError("blekit: sending to \(channel.peer) failed: \(error)\n")
      }
      channel.close()
      if once && sends > 0 { break }
    }
    return sends
  }
}
