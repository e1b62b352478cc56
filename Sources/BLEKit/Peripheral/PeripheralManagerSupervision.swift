// Keeping a PeripheralManager's registrations alive: when bluetoothd restarts, every service
// and the advertisement are registered again with the new one; a power-off is reported.
import BlueZ
import DBus

/// What a look at the adapter found.
private enum AdapterPresence {
  case poweredOn, poweredOff, absent, unknown
}

/// The inputs the supervisor reacts to, in arrival order.
private enum SupervisionInput: Sendable {
  case owner(BusName?)
  case poweredOff
  case powerCheck
  case deadline(Int)
  case busLost
}

extension PeripheralManager {
  /// How long a power-off waits for bluetoothd to leave before it counts as a power-off:
  /// bluetoothd powers its adapters off, removes them, then leaves the bus, and on a loaded
  /// machine that takes seconds.
  public static let powerOffGrace: Duration = .seconds(10)

  /// Follows bluetoothd (`NameOwnerChanged` of `org.bluez`) and the adapter's `Powered`.
  ///
  /// When bluetoothd leaves, the exported objects stay; when it returns within `returnWithin`
  /// and the adapter is powered again, every published service and the current advertisement
  /// are registered again. The stream ends after a terminal event (power-off, removal, no return,
  /// failed registration, the bus lost), or when the iteration ends; ending it removes its
  /// match rules.
  public func supervise(returnWithin: Duration = .seconds(30)) async throws(BluetoothError)
    -> AsyncStream<BluetoothdInterruption>
  {
    try await supervise(returnWithin: returnWithin, powerOffGrace: Self.powerOffGrace)
  }

  /// ``supervise(returnWithin:)`` with another grace than ``powerOffGrace`` (for tests).
  func supervise(returnWithin: Duration, powerOffGrace: Duration) async throws(BluetoothError)
    -> AsyncStream<BluetoothdInterruption>
  {
    let watched: AsyncStream<BluetoothdEvent>
    do throws(BlueZError) {
      watched = try await BluetoothdWatcher.events(on: connection, adapter: adapterPath)
    } catch {
      throw .bluez(error)
    }
    // Unbounded: a handful of owner and power changes, each of which must be acted on.
    let (inputs, input) = AsyncStream.makeStream(
      of: SupervisionInput.self, bufferingPolicy: .unbounded)
    let feed = Task {
      for await event in watched {
        switch event {
        case .owner(let owner): input.yield(.owner(owner))
        case .adapterPoweredOff, .adapterRemoved: input.yield(.poweredOff)
        case .busLost: input.yield(.busLost)
        }
      }
    }
    // Unbounded: a few events per bluetoothd restart; none may be lost.
    let (events, output) = AsyncStream.makeStream(
      of: BluetoothdInterruption.self, bufferingPolicy: .unbounded)
    let loop = Task {
      var stopped = false
      var generation = 0
      var timers: [Task<Void, Never>] = []
      var powerCheckPending = false
      defer { for timer in timers { timer.cancel() } }
      for await next in inputs {
        switch next {
        case .owner(nil):
          guard !stopped else { continue }
          // A bus daemon that stops drops its clients one by one: bluetoothd's leaving can be
          // heard just before the loss of the connection. The daemon answers only if it stays.
          if await BluetoothdWatcher.busIsLost(connection) {
            output.yield(.busLost)
            output.finish()
            return
          }
          stopped = true
          generation += 1
          let current = generation
          output.yield(.stopped(waitingUpTo: returnWithin))
          timers.append(
            Task {
              try? await Task.sleep(for: returnWithin)
              input.yield(.deadline(current))
            })
        case .owner(let name?):
          guard stopped else { continue }
          stopped = false
          generation += 1
          let remaining = returnWithin
          if let failure = await registerAgain(owner: name, within: remaining) {
            output.yield(.resumeFailed(failure))
            output.finish()
            return
          }
          output.yield(.resumed)
        case .poweredOff:
          // One check at a time: further power-offs before it runs change nothing it will see.
          guard !stopped, !powerCheckPending else { continue }
          powerCheckPending = true
          timers.append(
            Task {
              try? await Task.sleep(for: powerOffGrace)
              input.yield(.powerCheck)
            })
        case .powerCheck:
          powerCheckPending = false
          guard !stopped else { continue }
          // Still owned, the adapter still there and off: a real power-off; still owned and
          // the adapter gone: a removal (bluetoothd on its way out powers its adapters off and
          // removes them first, then leaves the bus).
          if await BluetoothdWatcher.owner(on: connection) == nil { continue }
          switch await adapterPresence() {
          case .poweredOff: output.yield(.adapterPoweredOff)
          case .absent: output.yield(.adapterRemoved)
          case .poweredOn, .unknown: continue
          }
          output.finish()
          return
        case .deadline(let of):
          guard stopped, of == generation else { continue }
          output.yield(.didNotReturn(returnWithin))
          output.finish()
          return
        case .busLost:
          output.yield(.busLost)
          output.finish()
          return
        }
      }
      output.finish()
    }
    output.onTermination = { _ in
      loop.cancel()
      feed.cancel()
      input.finish()
    }
    return events
  }

  /// Whether the adapter object exists, and whether it is powered.
  private func adapterPresence() async -> AdapterPresence {
    do {
      _ = try await Self.findAdapter(adapterName, on: connection)
      return .poweredOn
    } catch {
      switch error.code {
      case .notReady: return .poweredOff
      case .adapterNotFound: return .absent
      default: return .unknown
      }
    }
  }

  /// Whether the adapter is powered now (false when it cannot be read).
  private func adapterIsPowered() async -> Bool {
    (try? await Self.findAdapter(adapterName, on: connection)) != nil
  }

  /// Waits until the new bluetoothd has the adapter powered (and the caller check follows the
  /// new owner), then registers every service and the advertisement again.
  /// - Returns: nil on success, else why it failed.
  private func registerAgain(owner: BusName, within limit: Duration) async -> String? {
    let deadline = ContinuousClock.now + limit
    while true {
      if Task.isCancelled || isClosed || connection.isClosed { return "the peripheral closed" }
      if callerCheck.currentOwner == owner, await adapterIsPowered() { break }
      if ContinuousClock.now >= deadline {
        return "adapter \(adapterName) was not powered within \(limit) after bluetoothd returned"
      }
      try? await Task.sleep(for: .milliseconds(250))
    }
    let (applications, advertisement) = state.withLock { state in
      (state.services.values.map(\.registration), state.advertisement)
    }
    do throws(BlueZError) {
      for application in applications { try await application.registerAgain() }
      try await advertisement?.registerAgain()
    } catch {
      return "registering again with bluetoothd: \(error.description)"
    }
    return nil
  }
}
