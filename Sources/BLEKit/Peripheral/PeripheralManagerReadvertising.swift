// Connectable advertising that goes on while centrals are connected. A controller stops
// advertising when a central connects through it (Core spec, LE Set Advertising Enable), and
// Linux enables the advertisement again only when that central leaves; registering it again
// makes the kernel advertise alongside the link, so that further centrals can connect.
//
// Only with extended advertising. With legacy advertising Linux 6.1 remembers which
// advertisement the link came from and, when the link ends, enables that one again; once it
// has been withdrawn, it advertises an empty non-connectable PDU instead (ADV_NONCONN_IND
// from a random address), to which no central can connect. Legacy adapters therefore keep
// their one registration and pause.
import BlueZ
import DBus

extension PeripheralManager {
  /// Follows this adapter's links, once per manager, and registers the current connectable
  /// advertisement again whenever one comes up (until the manager closes).
  func followConnectionsToKeepAdvertising() async throws(BluetoothError) {
    let first = state.withLock { state in
      defer { state.followsLinksForAdvertising = true }
      return !state.followsLinksForAdvertising
    }
    guard first else { return }
    let tree: BlueZObjectTree
    do {
      tree = try follower()
    } catch {
      state.withLock { $0.followsLinksForAdvertising = false }
      throw error
    }
    let links = ConnectionEventRelay.events(on: adapterPath, in: tree)
    Task { [weak self] in
      for await link in links {
        guard case .connected = link else { continue }
        guard let self else { return }
        await self.advertiseAgain()
      }
    }
  }

  /// Registers the current connectable advertisement under a new path and then withdraws the
  /// old registration, so that the adapter is never left without one: when bluetoothd refuses
  /// the new one, the old one stays, and the kernel enables it again when the link ends.
  func advertiseAgain() async {
    let (current, object, extended) = state.withLock { state in
      (state.advertisement, state.connectableAdvertisement, state.extendedAdvertising)
    }
    guard let current, current.isRegistered, let object else { return }
    let events = eventContinuation
    guard extended else {
      events.yield(
        .advertisingPaused(
          reason: "\(adapterName) advertises with legacy PDUs, which stop while a central is "
            + "connected"))
      return
    }
    let number = state.withLock { state in
      defer { state.nextAdvertisement += 1 }
      return state.nextAdvertisement
    }
    let fresh: LEAdvertisementRegistration
    do {
      fresh = try await LEAdvertisingManager1(connection: connection, adapter: adapterPath)
        .register(
          object, at: ObjectPath.applicationRoot.appending("advertisement\(number)"),
          callerCheck: callerCheck, onRelease: { events.yield(.advertisingStopped) })
    } catch {
      events.yield(.advertisingPaused(reason: error.message))
      return
    }
    // stopAdvertising, startAdvertising or close may have run meanwhile: then the new
    // registration is the one to withdraw.
    let replaced = state.withLock { state in
      guard !state.closed, state.advertisement === current else { return false }
      state.advertisement = fresh
      return true
    }
    await runCleanup { await (replaced ? current : fresh).unregister() }
  }
}
