// Signals: delivery in order, match rules filtering, ending a subscription removes its rule.
import DBus
import Testing

@Suite struct SignalTests {
  @Test func thousandSignalsArriveInOrder() async throws {
    try await withServerAndClient { _, server, client in
      let stream = try await client.signals(
        MatchRule(sender: server.uniqueName, interface: "org.blekit.Test", member: "Tick"))
      for index in 0..<1000 {
        try server.emitSignal(
          path: "/test", interface: "org.blekit.Test", member: "Tick",
          arguments: [.uint32(UInt32(index))])
      }
      var received: [UInt32] = []
      for try await signal in stream {
        #expect(signal.sender == server.uniqueName)
        #expect(signal.path == "/test")
        received.append(signal.arguments.first?.uint32Value ?? .max)
        if received.count == 1000 { break }
      }
      #expect(received == (0..<1000).map { UInt32($0) })
    }
  }

  @Test func rulesFilterByPathNamespaceAndArg0() async throws {
    try await withServerAndClient { _, server, client in
      let stream = try await client.signals(
        MatchRule(pathNamespace: "/org/bluez", interface: "org.blekit.Test", arg0: "wanted"))
      let emit = { (path: ObjectPath, arg: String) throws(DBusError) in
        try server.emitSignal(
          path: path, interface: "org.blekit.Test", member: "S", arguments: [.string(arg)])
      }
      try emit("/elsewhere", "wanted")
      try emit("/org/bluez/hci0", "unwanted")
      try emit("/org/bluez2", "wanted")
      try emit("/org/bluez/hci0/dev_1", "wanted")
      try emit("/org/bluez", "wanted")
      var paths: [ObjectPath] = []
      for try await signal in stream {
        paths.append(signal.path)
        if paths.count == 2 { break }
      }
      #expect(paths == ["/org/bluez/hci0/dev_1", "/org/bluez"])
    }
  }

  @Test func endingSubscriptionRemovesMatchRule() async throws {
    try await withServerAndClient { _, server, client in
      let rule = MatchRule(sender: server.uniqueName, interface: "org.blekit.Test", member: "Tick")
      do {
        let stream = try await client.signals(rule)
        let check101 = try await
          (matchRules(of: client, askingWith: server).contains(where: rule.matchesListing))
        #expect(check101)
        try server.emitSignal(
          path: "/test", interface: "org.blekit.Test", member: "Tick", arguments: [.uint32(1)])
        for try await _ in stream { break }
        stream.cancel()
        var after: [Signal] = []
        for try await signal in stream { after.append(signal) }
        #expect(after.isEmpty)
      }
      // The RemoveMatch is queued before this call, so the bus has processed it by the reply.
      _ = try await client.nameOwner(server.uniqueName)
      let check102 = try await
        (!matchRules(of: client, askingWith: server).contains(where: rule.matchesListing))
      #expect(check102)
    }
  }

  @Test func droppingTheStreamRemovesMatchRule() async throws {
    try await withServerAndClient { _, server, client in
      let rule = MatchRule(interface: "org.blekit.Dropped")
      do {
        let stream = try await client.signals(rule)
        _ = stream
        let check103 = try await
          (matchRules(of: client, askingWith: server).contains(where: rule.matchesListing))
        #expect(check103)
      }
      _ = try await client.nameOwner(server.uniqueName)
      // Give the queue a turn to send RemoveMatch, then round-trip once more.
      _ = try await client.nameOwner(server.uniqueName)
      let check104 = try await
        (!matchRules(of: client, askingWith: server).contains(where: rule.matchesListing))
      #expect(check104)
    }
  }

  @Test func cancellingTheConsumerEndsTheStream() async throws {
    try await withServerAndClient { _, server, client in
      let rule = MatchRule(interface: "org.blekit.Cancelled")
      let stream = try await client.signals(rule)
      let consumer = Task {
        var count = 0
        for try await _ in stream { count += 1 }
        return count
      }
      consumer.cancel()
      #expect(try await consumer.value == 0)
      _ = try await client.nameOwner(server.uniqueName)
      _ = try await client.nameOwner(server.uniqueName)
      let check105 = try await
        (!matchRules(of: client, askingWith: server).contains(where: rule.matchesListing))
      #expect(check105)
    }
  }

  @Test func wellKnownSenderIsTracked() async throws {
    try await withServerAndClient { bus, server, client in
      let check106 = try await (server.requestName("org.blekit.Emitter") == .primaryOwner)
      #expect(check106)
      let stranger = try bus.connect()
      defer { stranger.close() }
      let stream = try await client.signals(
        MatchRule(sender: "org.blekit.Emitter", interface: "org.blekit.Test"))
      let other = try await client.signals(MatchRule(interface: "org.blekit.Test"))
      try stranger.emitSignal(
        path: "/test", interface: "org.blekit.Test", member: "S", arguments: [.string("stranger")])
      try server.emitSignal(
        path: "/test", interface: "org.blekit.Test", member: "S", arguments: [.string("owner")])
      for try await signal in stream {
        #expect(signal.arguments == ["owner"])
        break
      }
      var seen: [DBusValue] = []
      for try await signal in other {
        seen.append(contentsOf: signal.arguments)
        if seen.count == 2 { break }
      }
      // Different senders: the bus does not order their signals relative to each other.
      #expect(Set(seen) == ["stranger", "owner"])
    }
  }

  @Test func aWellKnownSenderThatNobodyOwnsMatchesNothing() async throws {
    try await withServerAndClient { bus, server, client in
      let stranger = try bus.connect()
      defer { stranger.close() }
      // Nobody owns org.blekit.Absent: a stranger's signal must not pass for it, even when a
      // broader rule of the same connection brings the signal in.
      let guarded = try await client.signals(
        MatchRule(sender: "org.blekit.Absent", interface: "org.blekit.Test"))
      let broad = try await client.signals(MatchRule(interface: "org.blekit.Test"))
      try stranger.emitSignal(
        path: "/test", interface: "org.blekit.Test", member: "S", arguments: [.string("fake")])
      for try await signal in broad {
        #expect(signal.arguments == ["fake"])
        break
      }
      // The owner appears and signals: only its signal reaches the guarded stream.
      #expect(try await server.requestName("org.blekit.Absent") == .primaryOwner)
      try server.emitSignal(
        path: "/test", interface: "org.blekit.Test", member: "S", arguments: [.string("real")])
      for try await signal in guarded {
        #expect(signal.arguments == ["real"])
        break
      }
    }
  }

  @Test func matchRuleStringQuotesValues() {
    let rule = MatchRule(
      sender: "org.bluez", path: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Properties",
      member: "PropertiesChanged", arg0: "it's")
    #expect(
      rule.ruleString
        == "type='signal',sender='org.bluez',path='/org/bluez/hci0',"
        + "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='it'\\''s'")
  }
}

extension MatchRule {
  /// Whether a rule as the bus lists it (its own field order) is this rule.
  func matchesListing(_ listed: String) -> Bool {
    let mine = Set(ruleString.split(separator: ","))
    return Set(listed.split(separator: ",")) == mine
  }
}
