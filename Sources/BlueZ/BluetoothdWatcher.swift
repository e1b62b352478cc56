// Following bluetoothd from a client: when it leaves and returns, and when an adapter is
// powered off, as one stream of events.
import DBus

/// What bluetoothd and one of its adapters do, as heard on the bus.
public enum BluetoothdEvent: Sendable, Equatable {
  /// `org.bluez` has a new owner (a bluetoothd that started), or none (it left the bus).
  case owner(BusName?)
  /// The adapter's `Powered` changed to false (sent by bluetoothd, the owner of `org.bluez`).
  case adapterPoweredOff
  /// The adapter object went away (`InterfacesRemoved` of its `Adapter1`, sent by bluetoothd):
  /// its controller was removed, or bluetoothd is on its way out (it removes its adapters
  /// before it leaves the bus).
  case adapterRemoved
  /// The connection to the bus was lost: no event follows.
  case busLost
}

/// Watches bluetoothd on a connection: `NameOwnerChanged` of `org.bluez` (sent by the bus),
/// `PropertiesChanged` of one adapter's `Adapter1` and `InterfacesRemoved` of it (sent by the
/// owner of `org.bluez` only: the match rules name the sender, so another client cannot fake a
/// power-off or a removal).
public enum BluetoothdWatcher {
  /// The events for `adapter`, in arrival order, from now on. Ending the iteration (or
  /// dropping the stream) removes the match rules; the stream ends after ``BluetoothdEvent/busLost``.
  public static func events(on connection: DBusConnection, adapter: ObjectPath)
    async throws(BlueZError) -> AsyncStream<BluetoothdEvent>
  {
    let owners: SubscriptionStream<BusName?>
    let adapterChanges: SignalStream
    let removals: SignalStream
    do throws(DBusError) {
      owners = try await connection.nameOwnerChanges(BlueZ.service)
      adapterChanges = try await connection.signals(
        MatchRule(
          sender: BlueZ.service, path: adapter, interface: .properties,
          member: "PropertiesChanged", arg0: BlueZ.Interface.adapter.rawValue))
      // The rule cannot name the removed object (arg0 matches strings, not object paths).
      removals = try await connection.signals(
        MatchRule(
          sender: BlueZ.service, path: "/", interface: .objectManager,
          member: "InterfacesRemoved"))
    } catch {
      throw BlueZError(error)
    }
    // Unbounded: a handful of owner and power changes, each of which must be acted on.
    let (events, output) = AsyncStream.makeStream(
      of: BluetoothdEvent.self, bufferingPolicy: .unbounded)
    // Each feed's stream ends with an error only when the bus connection is lost.
    let ownerFeed = Task {
      do throws(DBusError) {
        for try await owner in owners { output.yield(.owner(owner)) }
      } catch {
        output.yield(.busLost)
        output.finish()
      }
    }
    let powerFeed = Task {
      do throws(DBusError) {
        for try await signal in adapterChanges {
          guard signal.arguments.count > 1,
            let changed = signal.arguments[1].stringVariantDictionary
          else { continue }
          let changes = PropertyChanges<Adapter1>(changed: changed, invalidated: [])
          if case .changed(false)? = changes[Adapter1.powered] {
            output.yield(.adapterPoweredOff)
          }
        }
      } catch {
        output.yield(.busLost)
        output.finish()
      }
    }
    let removalFeed = Task {
      do throws(DBusError) {
        for try await signal in removals {
          guard signal.arguments.count > 1, signal.arguments[0].objectPathValue == adapter,
            signal.arguments[1].stringArrayValue?.contains(BlueZ.Interface.adapter.rawValue)
              == true
          else { continue }
          output.yield(.adapterRemoved)
        }
      } catch {
        output.yield(.busLost)
        output.finish()
      }
    }
    output.onTermination = { _ in
      ownerFeed.cancel()
      powerFeed.cancel()
      removalFeed.cancel()
    }
    return events
  }

  /// The unique name of the running bluetoothd (the owner of `org.bluez`), or nil when it is
  /// not on the bus or the bus cannot be asked.
  public static func owner(on connection: DBusConnection) async -> BusName? {
    (try? await connection.nameOwner(BlueZ.service)) ?? nil
  }

  /// Whether the connection to the bus is lost: the bus daemon no longer answers a ping. A
  /// bus daemon that stops drops its clients one by one, so bluetoothd's leaving can be heard
  /// just before the loss of the connection; this tells the two apart.
  public static func busIsLost(_ connection: DBusConnection) async -> Bool {
    do throws(DBusError) {
      try await connection.pingBus()
      return false
    } catch {
      return error.code == .disconnected
    }
  }
}
