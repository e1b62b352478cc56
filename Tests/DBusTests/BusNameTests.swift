// Owning names: RequestName/ReleaseName, GetNameOwner and NameOwnerChanged seen elsewhere.
import DBus
import Testing

@Suite struct BusNameTests {
  @Test func requestReleaseAndOwnerChanges() async throws {
    try await withServerAndClient { _, server, client in
      let name: BusName = "org.blekit.Owned"
      let check101 = try await (client.nameOwner(name) == nil)
      #expect(check101)
      let changes = try await client.nameOwnerChanges(name)
      let check102 = try await (server.requestName(name) == .primaryOwner)
      #expect(check102)
      let check103 = try await (server.requestName(name) == .alreadyOwner)
      #expect(check103)
      let check104 = try await (client.requestName(name, flags: .doNotQueue) == .exists)
      #expect(check104)
      let check105 = try await (client.nameOwner(name) == server.uniqueName)
      #expect(check105)
      try await server.releaseName(name)
      let check106 = try await (client.nameOwner(name) == nil)
      #expect(check106)
      var seen: [BusName?] = []
      for try await owner in changes {
        seen.append(owner)
        if seen.count == 2 { break }
      }
      #expect(seen == [server.uniqueName, nil])
      // Calls by the well-known name reach the owner.
      let check107 = try await (server.requestName(name) == .primaryOwner)
      #expect(check107)
      let who = try await client.call(
        destination: name, path: "/test", interface: "org.blekit.Test", member: "WhoAmI")
      #expect(who == [.string(client.uniqueName.rawValue)])
    }
  }

  @Test func ownerDisconnectingIsSeen() async throws {
    try await withTestBus { bus in
      let watcher = try bus.connect()
      defer { watcher.close() }
      let owner = try bus.connect()
      let name: BusName = "org.blekit.Leaving"
      let changes = try await watcher.nameOwnerChanges(name)
      let check108 = try await (owner.requestName(name) == .primaryOwner)
      #expect(check108)
      owner.close()
      var seen: [BusName?] = []
      for try await change in changes {
        seen.append(change)
        if seen.count == 2 { break }
      }
      #expect(seen == [owner.uniqueName, nil])
    }
  }
}
