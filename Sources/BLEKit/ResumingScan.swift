// A scan that survives a bluetoothd restart: it pauses while org.bluez is gone and starts
// discovery again when bluetoothd returns (within a bounded wait).
import BlueZ

/// A pause or resumption of a ``CentralManager/resumingScan(_:returnWithin:onInterruption:)``.
public enum ScanInterruption: Sendable, Equatable {
  /// bluetoothd left; the scan waits for it (the text says how long).
  case paused(String)
  /// bluetoothd returned and discovery runs again.
  case resumed
}

extension CentralManager {
  /// How long a power-off waits to see whether bluetoothd is stopping: it powers its adapters
  /// off, then removes them, then leaves the bus, and on a loaded machine that takes seconds.
  static let serviceStopGrace: Duration = .seconds(10)

  /// Scans like ``scan(_:)``, but when bluetoothd stops, waits up to `returnWithin` for it to
  /// return with the adapter powered and then scans again; peripherals are reported again after
  /// the restart (bluetoothd forgot them). `onInterruption` is told of each pause and resume.
  ///
  /// The stream ends with ``CentralError/Code/serviceUnavailable`` when bluetoothd does not
  /// return in time, and with the scan's own error for a power-off or a removed adapter.
  public func resumingScan(
    _ options: ScanOptions, returnWithin: Duration = .seconds(30),
    onInterruption: @escaping @Sendable (ScanInterruption) -> Void = { _ in }
  ) async throws(CentralError) -> DiscoveryStream {
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: Discovery.self, throwing: (any Error).self, bufferingPolicy: .unbounded)
    // Each session hands its discoveries straight to this stream; only its end goes through
    // the supervising task below.
    let (ends, endings) = AsyncStream.makeStream(of: SessionEnd.self, bufferingPolicy: .unbounded)
    let sink = ScanSink(
      yield: { continuation.yield($0) },
      end: { error in endings.yield(error.map(SessionEnd.failed) ?? .closed) })
    let first = try await startScan(options, sink: sink)
    let task = Task {
      var session = first
      var nextEnd = ends.makeAsyncIterator()
      while true {
        let end = await nextEnd.next()
        await session.stop()
        switch end {
        case nil, .closed?:
          // Cancelled (the consumer stopped) or the central closed.
          continuation.finish()
          return
        case .failed(let error)?:
          guard let error = error as? CentralError, await bluetoothdLeft(after: error) else {
            continuation.finish(throwing: error)
            return
          }
        }
        onInterruption(.paused("bluetoothd stopped; waiting up to \(returnWithin) for it"))
        guard let resumed = await scanAfterReturn(options, sink: sink, within: returnWithin)
        else {
          if Task.isCancelled {
            continuation.finish()
          } else {
            continuation.finish(
              throwing: CentralError(
                .serviceUnavailable, "bluetoothd did not return within \(returnWithin)"))
          }
          return
        }
        onInterruption(.resumed)
        session = resumed
      }
    }
    continuation.onTermination = { _ in task.cancel() }
    return DiscoveryStream(stream: stream)
  }

  /// How one session of a resuming scan ended.
  private enum SessionEnd: Sendable {
    case failed(any Error)
    case closed
  }

  /// Whether a scan's error means bluetoothd left or took the adapter away (rather than a
  /// power-off that stays). A removed adapter counts: bluetoothd removes its adapters as it
  /// stops, and an adapter that comes back within the wait is scanned again.
  private func bluetoothdLeft(after error: CentralError) async -> Bool {
    switch error.code {
    case .serviceUnavailable, .adapterNotFound: return true
    case .poweredOff:
      return await becomes([.serviceUnavailable, .unsupported], within: Self.serviceStopGrace)
    default: return false
    }
  }

  /// Starts a new scan once bluetoothd is back with the adapter powered; retries the start
  /// (the old session may still be stopping, a fresh adapter may not be ready) until `limit`.
  private func scanAfterReturn(_ options: ScanOptions, sink: ScanSink, within limit: Duration)
    async -> ScanSession?
  {
    let deadline = ContinuousClock.now + limit
    while !Task.isCancelled {
      let left = deadline - ContinuousClock.now
      guard left > .zero else { return nil }
      if (try? await waitUntilPoweredOn(timeout: left)) != nil,
        let scan = try? await startScan(options, sink: sink)
      {
        return scan
      }
      try? await Task.sleep(for: .milliseconds(250))
    }
    return nil
  }
}
