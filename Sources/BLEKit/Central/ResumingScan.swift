// A scan that survives a bluetoothd restart: it pauses while org.bluez is gone and starts
// discovery again when bluetoothd returns (within a bounded wait).
import BlueZ
import DBus
import Synchronization

extension CentralManager {
  /// How long a power-off waits to see whether bluetoothd is stopping: it powers its adapters
  /// off, then removes them, then leaves the bus, and on a loaded machine that takes seconds.
  static let serviceStopGrace: Duration = .seconds(10)

  /// Starts a scan whose sessions hand their discoveries straight to `deliver`, and a task that
  /// waits for each session's end: it starts the next session after a bluetoothd restart (when
  /// ``ScanOptions/resumeWithin`` says so), or calls `finish` (with `nil` when cancelled or the
  /// central closed). Cancel the task to stop.
  func superviseScan(
    _ options: ScanOptions,
    onInterruption: @escaping @Sendable (BluetoothdInterruption) -> Void,
    deliver: @escaping @Sendable (Discovery) -> Void,
    finish: @escaping @Sendable ((any Error)?) -> Void
  ) async throws(BluetoothError) -> Task<Void, Never> {
    // Unbounded: one end per scan session.
    let (ends, endings) = AsyncStream.makeStream(of: ScanEnd.self, bufferingPolicy: .unbounded)
    let sink = ScanSink(yield: deliver, end: { endings.yield($0) })
    let first = try await startScan(options, sink: sink)
    return Task {
      var session = first
      var nextEnd = ends.makeAsyncIterator()
      while true {
        let end = await nextEnd.next()
        await session.stop()
        switch end {
        case nil, .closed?:
          // Cancelled (the consumer stopped) or the central closed.
          finish(nil)
          return
        case .failed(let error)?:
          guard options.resumeWithin != nil, let error = error as? BluetoothError,
            await bluetoothdLeft(after: error)
          else {
            finish(error)
            return
          }
        }
        if let lost = await objects.busLoss() {
          finish(lost)
          return
        }
        let returnWithin = options.resumeWithin ?? .zero
        onInterruption(.stopped(waitingUpTo: returnWithin))
        let resumed: ScanSession?
        do throws(BluetoothError) {
          resumed = try await scanAfterReturn(options, sink: sink, within: returnWithin)
        } catch {
          finish(error)
          return
        }
        guard let resumed else {
          finish(
            Task.isCancelled
              ? nil
              : BluetoothError(
                .serviceUnavailable, "bluetoothd did not return within \(returnWithin)"))
          return
        }
        onInterruption(.resumed)
        session = resumed
      }
    }
  }

  /// Whether a scan's error means bluetoothd left (rather than a power-off or an adapter
  /// removal that stays). bluetoothd removes its adapters as it stops, so a removed adapter
  /// counts only when bluetoothd leaves the bus within ``serviceStopGrace``; a controller
  /// unplugged under a running bluetoothd ends the scan with ``BluetoothError/Code/adapterNotFound``.
  private func bluetoothdLeft(after error: BluetoothError) async -> Bool {
    switch error.code {
    case .serviceUnavailable: return true
    case .adapterNotFound:
      return await becomes([.serviceUnavailable], within: Self.serviceStopGrace)
    case .poweredOff:
      return await becomes([.serviceUnavailable, .unsupported], within: Self.serviceStopGrace)
    default: return false
    }
  }

  /// Starts a new scan once bluetoothd is back with the adapter powered; retries the start
  /// (the old session may still be stopping, a fresh adapter may not be ready) until `limit`.
  /// - Throws: ``BluetoothError/Code/busLost`` (at once) when the system bus is gone.
  private func scanAfterReturn(_ options: ScanOptions, sink: ScanSink, within limit: Duration)
    async throws(BluetoothError) -> ScanSession?
  {
    let deadline = ContinuousClock.now + limit
    while !Task.isCancelled {
      let left = deadline - ContinuousClock.now
      guard left > .zero else { return nil }
      do throws(BluetoothError) {
        try await waitUntilPoweredOn(timeout: left)
        return try await startScan(options, sink: sink)
      } catch  where error.code == .busLost {
        throw error
      } catch {
        try? await Task.sleep(for: .milliseconds(250))
      }
    }
    return nil
  }
}

extension BlueZObjectTree {
  /// When bluetoothd seems to have left: the error to end with if it is the system bus that
  /// goes away (bluetoothd cannot return on this connection then), else nil. A bus daemon that
  /// stops drops its clients one by one, so bluetoothd's leaving can be heard just before the
  /// loss of the connection; the bus daemon answers a ping only if it stays.
  func busLoss() async -> BluetoothError? {
    do throws(DBusError) {
      try await connection.pingBus()
      return nil
    } catch  where error.code == .disconnected {
      return BluetoothError(
        .busLost, connectionLostMessage ?? "lost the connection to the system bus")
    } catch {
      return nil
    }
  }
}
