// TopicLayout: which topic each payload goes to: blekit's own layout under a prefix
// (default `blekit/<gateway>`), Theengs Gateway's `home/<gateway>/BTtoMQTT/<MAC>`, and Home
// Assistant's discovery topics.

/// The two topic and payload layouts a gateway can publish in.
public enum PayloadLayout: String, Sendable, Hashable, CaseIterable {
  /// blekit's: `<prefix>/devices/<ADDRESS>`, `<prefix>/ids/<ID>`, `<prefix>/summary/<ID>`,
  /// `<prefix>/status`; JSON from ``SightingPayload``.
  case blekit
  /// Theengs Gateway's: `<prefix>/BTtoMQTT/<MAC without colons>` and `<prefix>/LWT`, with its
  /// field names (existing Theengs consumers work unchanged).
  case theengs
}

/// The topics of one gateway.
public struct TopicLayout: Sendable, Hashable {
  /// The layout.
  public var layout: PayloadLayout
  /// The prefix every topic starts with (no trailing `/`).
  public var prefix: String
  /// Home Assistant's discovery prefix.
  public var discoveryPrefix: String
  /// The gateway's name.
  public var gateway: String

  /// The layout's default prefix for a gateway: `blekit/<gateway>` or `home/<gateway>`.
  public static func defaultPrefix(_ layout: PayloadLayout, gateway: String) -> String {
    layout == .blekit ? "blekit/\(gateway)" : "home/\(gateway)"
  }

  /// Creates the topics of a gateway; `prefix` defaults to the layout's.
  public init(
    layout: PayloadLayout = .blekit, gateway: String, prefix: String? = nil,
    discoveryPrefix: String = "homeassistant"
  ) {
    self.layout = layout
    self.gateway = gateway
    var chosen = prefix ?? Self.defaultPrefix(layout, gateway: gateway)
    while chosen.hasSuffix("/") { chosen.removeLast() }
    self.prefix = chosen
    self.discoveryPrefix = discoveryPrefix
  }

  /// Whether a text is usable as one topic segment: not empty, no `/`, `+`, `#` or NUL.
  public static func isSegment(_ text: String) -> Bool {
    !text.isEmpty && !text.contains(where: { "/+#\u{0}".contains($0) })
  }

  /// Whether a prefix is usable: segments joined by `/`, no wildcards, not starting with `$`.
  public static func isPrefix(_ text: String) -> Bool {
    !text.isEmpty && !text.hasPrefix("$") && !text.contains(where: { "+#\u{0}".contains($0) })
      && !text.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty)
  }

  /// The retained availability topic: `<prefix>/status` (`online`/`offline`), Theengs'
  /// `<prefix>/LWT`.
  public var availability: String {
    layout == .blekit ? "\(prefix)/status" : "\(prefix)/LWT"
  }

  /// A sighting of a device: `<prefix>/devices/<ADDRESS>`, or with an ID (a monitored one)
  /// `<prefix>/ids/<ID>`; Theengs: `<prefix>/BTtoMQTT/<ADDRESS without colons>`.
  public func sighting(address: String, id: String?) -> String {
    switch layout {
    case .blekit:
      if let id { return "\(prefix)/ids/\(Self.segment(id))" }
      return "\(prefix)/devices/\(Self.segment(address.uppercased()))"
    case .theengs:
      return "\(prefix)/BTtoMQTT/\(Self.segment(address.uppercased().replacingColons()))"
    }
  }

  /// The periodic summary of an ID: `<prefix>/summary/<ID>` (both layouts).
  public func summary(id: String) -> String {
    "\(prefix)/summary/\(Self.segment(id))"
  }

  /// Home Assistant's discovery topic for the RSSI sensor of an ID, retained:
  /// `<discovery>/sensor/blekit_<gateway>_<ID>/config`.
  public func homeAssistantConfig(id: String) -> String {
    "\(discoveryPrefix)/sensor/\(homeAssistantObjectID(id))/config"
  }

  /// `blekit_<gateway>_<ID>`, with anything but letters, digits, `_` and `-` as `_`.
  public func homeAssistantObjectID(_ id: String) -> String {
    let raw = "blekit_\(gateway)_\(id)"
    return String(raw.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") ? $0 : "_" })
  }

  /// A text made safe as one topic segment (`/`, `+`, `#` become `_`).
  static func segment(_ text: String) -> String {
    String(text.map { "/+#\u{0}".contains($0) ? "_" : $0 })
  }
}

extension String {
  fileprivate func replacingColons() -> String { String(filter { $0 != ":" }) }
}
