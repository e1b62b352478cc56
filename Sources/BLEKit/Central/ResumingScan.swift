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
          guard options.resumeWithin != nil, let error = error as? BluetoothError else {
            finish(error)
            return
          }
          if let ending = await endingUnlessBluetoothdLeft(after: error) {
            finish(ending)
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

  /// The error a scan ends with, or nil when its error means bluetoothd left (and the scan
  /// waits for its return). bluetoothd powers its adapters off, removes them, then leaves the
  /// bus as it stops, and on a loaded machine that takes seconds: a power-off or a removal
  /// counts as bluetoothd leaving only when org.bluez leaves the bus within
  /// ``serviceStopGrace``. A controller unplugged under a running bluetoothd is first seen as a
  /// power-off, then as the adapter's removal: that ends the scan with
  /// ``BluetoothError/Code/adapterNotFound``, not with the power-off.
  private func endingUnlessBluetoothdLeft(after error: BluetoothError) async -> BluetoothError? {
    switch error.code {
    case .serviceUnavailable:
      return nil
    case .adapterNotFound, .poweredOff:
      if await becomes([.serviceUnavailable], within: Self.serviceStopGrace) { return nil }
      if error.code == .poweredOff, state == .unsupported {
        return BluetoothError(.adapterNotFound, "adapter \(adapterName) was removed")
      }
      return error
    default:
      return error
    }
  }

  /// Starts a new scan once bluetoothd is back with the adapter powered; retries the start
  /// until `limit`: once the manager's scan slot is free when the old session still held it
  /// (the manager says when: no polling), and after ``startRetryDelay`` when bluetoothd
  /// refused the start (a fresh adapter that is not ready: no event says when it is).
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
      } catch  where error.code == .scanInProgress {
        _ = await scanSlotFrees(within: max(deadline - ContinuousClock.now, .zero))
      } catch {
        try? await Task.sleep(for: Self.startRetryDelay)
      }
    }
    return nil
  }

  /// How long a resuming scan waits before it tries a start that bluetoothd refused again.
  static let startRetryDelay: Duration = .milliseconds(250)
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
