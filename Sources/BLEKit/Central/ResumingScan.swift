// A scan that survives a bluetoothd restart: it pauses while org.bluez is gone and starts
// discovery again when bluetoothd returns (within a bounded wait).
import BlueZ
import DBus
import Synchronization

/// A scan started with ``CentralManager/scan(_:onInterruption:onDiscovery:)``.
public struct ScanRun: Sendable {
  let ends: AsyncThrowingStream<Never, any Error>
  let continuation: AsyncThrowingStream<Never, any Error>.Continuation

  /// Waits for the end of the scan: returns once it is stopped (by ``stop()``, or by cancelling
  /// the waiting task, which also stops it) or the central closed; throws the scan's error (a
  /// power-off, a removed adapter, bluetoothd gone for longer than the wait).
  public func wait() async throws {
    for try await _ in ends {}
  }

  /// Stops the scan: no more discoveries; this client's discovery session ends shortly after.
  public func stop() { continuation.finish() }
}

/// Whether a handler-driven scan still wants its discoveries.
private final class RunningFlag: Sendable {
  private let on = Atomic(true)
  var isOn: Bool { on.load(ordering: .acquiring) }
  func turnOff() { on.store(false, ordering: .releasing) }
}

extension CentralManager {
  /// How long a power-off waits to see whether bluetoothd is stopping: it powers its adapters
  /// off, then removes them, then leaves the bus, and on a loaded machine that takes seconds.
  static let serviceStopGrace: Duration = .seconds(10)

  /// Scans like ``scan(_:onInterruption:)``, but calls `onDiscovery` with each discovery where
  /// it is made (on the D-Bus connection's queue, as bluetoothd's signal is read) instead of
  /// handing it to a stream: no task is woken per discovery, which is what a live display
  /// wants. The handler runs with the scan locked, one discovery at a time: it must return
  /// quickly, must not block (a write to a terminal is fine; to a pipe that may fill, use the
  /// stream) and must not call this central.
  ///
  /// The returned ``ScanRun`` ends the way the stream would.
  public func scan(
    _ options: ScanOptions = ScanOptions(),
    onInterruption: @escaping @Sendable (BluetoothdInterruption) -> Void = { _ in },
    onDiscovery: @escaping @Sendable (Discovery) -> Void
  ) async throws(BluetoothError) -> ScanRun {
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: Never.self, throwing: (any Error).self)
    let running = RunningFlag()
    let supervisor = try await superviseScan(
      options, onInterruption: onInterruption,
      deliver: { discovery in if running.isOn { onDiscovery(discovery) } },
      finish: { error in continuation.finish(throwing: error) })
    let timer = options.timeout.map { limit in
      Task {
        try? await Task.sleep(for: limit)
        if !Task.isCancelled { continuation.finish() }
      }
    }
    continuation.onTermination = { _ in
      running.turnOff()
      timer?.cancel()
      supervisor.cancel()
    }
    return ScanRun(ends: stream, continuation: continuation)
  }

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

  /// Whether a scan's error means bluetoothd left or took the adapter away (rather than a
  /// power-off that stays). A removed adapter counts: bluetoothd removes its adapters as it
  /// stops, and an adapter that comes back within the wait is scanned again.
  private func bluetoothdLeft(after error: BluetoothError) async -> Bool {
    switch error.code {
    case .serviceUnavailable, .adapterNotFound: return true
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
