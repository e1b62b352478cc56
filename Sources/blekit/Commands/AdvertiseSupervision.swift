// `blekit advertise` under faults: follows the peripheral's supervision (bluetoothd leaving
// and returning, the adapter powering off) and decides how the command ends.
import ArgumentParsing
import BLEKit
import Synchronization

/// What the supervision of `advertise` saw: whether bluetoothd is away right now, and the
/// fault that ends the command, if any.
final class AdvertiseFaults: Sendable {
  private struct State {
    var away = false
    var stops = 0
    var ending: CLIError?
  }
  private let state = Mutex(State())

  /// How long `advertise` waits for bluetoothd to return before it exits with status 4.
  static let returnWithin: Duration = .seconds(30)

  /// True while nothing is going on (bluetoothd present, no fault ending the command): a
  /// released advertisement then really means bluetoothd dropped it.
  var isQuiet: Bool { state.withLock { !$0.away && $0.ending == nil } }

  /// How many times bluetoothd stopped so far (a release from before a stop is explained).
  var stops: Int { state.withLock { $0.stops } }

  /// The error the command exits with, when a fault ended it.
  var ending: CLIError? { state.withLock { $0.ending } }

  /// Follows `events` until they end; a terminal fault closes `manager` (which unregisters
  /// what it can and ends the serving loop). `agent` (advertise --pairable) is registered
  /// again whenever bluetoothd returns; a failure there ends the command.
  func follow(
    _ events: AsyncStream<BluetoothdInterruption>, manager: PeripheralManager,
    agent: PairingAgent? = nil
  ) async {
    for await event in events {
      var ending: CLIError?
      switch event {
      case .stopped:
        state.withLock {
          $0.away = true
          $0.stops += 1
        }
        writeStandardError(
          "blekit: bluetoothd stopped; waiting up to \(Self.returnWithin) to register again\n")
      case .resumed:
        state.withLock { $0.away = false }
        writeStandardError(
          "blekit: bluetoothd is back; service and advertisement registered again\n")
        if let agent {
          do {
            try await agent.registerAgain()
            writeStandardError("blekit: pairing agent registered again\n")
          } catch {
            ending = CLIError(.remoteError, "registering the pairing agent again: \(error)")
          }
        }
      case .resumeFailed(let why):
        ending = CLIError(.remoteError, why)
      case .didNotReturn(let limit):
        ending = CLIError(.bluetoothUnavailable, "bluetoothd did not return within \(limit)")
      case .adapterPoweredOff:
        ending = CLIError(
          .failure, "adapter \(manager.adapterName) was powered off; advertising stopped")
      case .adapterRemoved:
        ending = CLIError(
          .adapterNotFound, "adapter \(manager.adapterName) was removed; advertising stopped")
      case .busLost:
        ending = CLIError(.bluetoothUnavailable, busLostLine)
      }
      if let ending {
        state.withLock { $0.ending = ending }
        await manager.close()
        return
      }
    }
  }
}
