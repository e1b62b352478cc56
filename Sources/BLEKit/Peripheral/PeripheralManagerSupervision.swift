// Keeping a PeripheralManager's registrations alive: when bluetoothd restarts, every service
// and the advertisement are registered again with the new one; a power-off is reported. All of
// it follows the manager's object tree, the one follower of bluetoothd on its connection.
import BlueZ
import DBus

/// What a look at the adapter found.
private enum AdapterPresence {
  case poweredOn, poweredOff, absent, unknown
}

/// The inputs the supervisor reacts to, in arrival order.
private enum SupervisionInput: Sendable {
  /// bluetoothd left the bus (the tree reported every object removed).
  case stopped
  /// A bluetoothd is on the bus and the tree holds its objects.
  case started
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
  /// failed registration, the bus lost), when the manager closes, or when the iteration ends.
  public func supervise(returnWithin: Duration = .seconds(30)) async throws(BluetoothError)
    -> AsyncStream<BluetoothdInterruption>
  {
    try await supervise(returnWithin: returnWithin, powerOffGrace: Self.powerOffGrace)
  }

  /// ``supervise(returnWithin:)`` with another grace than ``powerOffGrace`` (for tests).
  func supervise(returnWithin: Duration, powerOffGrace: Duration) async throws(BluetoothError)
    -> AsyncStream<BluetoothdInterruption>
  {
    let tree = try follower()
    let adapter = adapterPath
    // Unbounded: a handful of owner and power changes, each of which must be acted on.
    let (inputs, input) = AsyncStream.makeStream(
      of: SupervisionInput.self, bufferingPolicy: .unbounded)
    // The manager's tree reports bluetoothd's leaving and return and the adapter's changes,
    // in the order it heard them; its handler runs under the tree's lock and only forwards.
    let observation = tree.observe { event in
      switch event {
      case .serviceStopped: input.yield(.stopped)
      case .serviceStarted: input.yield(.started)
      case .connectionLost: input.yield(.busLost)
      case .propertiesChanged(adapter, Adapter1.interface, let changed, _, _):
        if changed[Adapter1.powered.name]?.boolValue == false { input.yield(.poweredOff) }
      case .interfacesRemoved(adapter, let names):
        if names.contains(Adapter1.interface) { input.yield(.poweredOff) }
      default:
        break
      }
    }
    observation.onEnd { input.finish() }
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
        case .stopped:
          guard !stopped else { continue }
          // A bus daemon that stops drops its clients one by one: bluetoothd's leaving can be
          // heard just before the loss of the connection. The daemon answers only if it stays.
          if await tree.busLoss() != nil {
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
        case .started:
          guard stopped else { continue }
          stopped = false
          generation += 1
          if let failure = await registerAgain(within: returnWithin) {
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
          if tree.owner == nil { continue }
          switch adapterPresence() {
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
      observation.cancel()
      input.finish()
    }
    return events
  }

  /// Whether the adapter object exists, and whether it is powered, as the tree holds it.
  private func adapterPresence() -> AdapterPresence {
    guard objects.isServiceRunning else { return .unknown }
    guard let properties = objects.objects[adapterPath]?[Adapter1.interface] else {
      return .absent
    }
    return Self.powered(properties) == true ? .poweredOn : .poweredOff
  }

  /// Waits until the returned bluetoothd has the adapter powered (the tree's snapshot, then
  /// its changes to the adapter), then registers every service and the advertisement again.
  /// - Returns: nil on success, else why it failed.
  private func registerAgain(within limit: Duration) async -> String? {
    let adapter = adapterPath
    let (snapshot, _, changes) = objects.subscribe(where: { event in
      switch event {
      case .propertiesChanged(adapter, Adapter1.interface, _, _, _): true
      case .interfacesAdded(adapter, let interfaces): interfaces[Adapter1.interface] != nil
      default: false
      }
    })
    var powered = Self.powered(snapshot[adapter]?[Adapter1.interface]) == true
    if !powered {
      powered =
        await firstMatch(in: changes, within: limit) { event -> Bool? in
          switch event {
          case .propertiesChanged(_, _, _, _, let current):
            Self.powered(current) == true ? true : nil
          case .interfacesAdded(_, let interfaces):
            Self.powered(interfaces[Adapter1.interface]) == true ? true : nil
          default: nil
          }
        } ?? false
    }
    if Task.isCancelled || isClosed || connection.isClosed { return "the peripheral closed" }
    guard powered else {
      return "adapter \(adapterName) was not powered within \(limit) after bluetoothd returned"
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
