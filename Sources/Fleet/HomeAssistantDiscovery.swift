// HomeAssistantDiscovery: the retained config Home Assistant's MQTT integration reads to
// create a sensor per monitored ID (its "MQTT discovery").

import JSON

/// Home Assistant discovery payloads.
public enum HomeAssistantDiscovery {
  /// The config of an RSSI sensor for a monitored ID: state from the ID's sighting topic,
  /// availability from the gateway's, unavailable after `expireAfter` silent seconds.
  public static func sensorConfig(id: String, topics: TopicLayout, expireAfter: Int) -> JSONValue {
    let objectID = topics.homeAssistantObjectID(id)
    return .object([
      .init("name", .string("RSSI at \(topics.gateway)")),
      .init("object_id", .string(objectID)),
      .init("unique_id", .string(objectID)),
      .init("state_topic", .string(topics.sighting(address: "", id: id))),
      .init("value_template", .string("{{ value_json.rssi }}")),
      .init("json_attributes_topic", .string(topics.sighting(address: "", id: id))),
      .init("unit_of_measurement", .string("dBm")),
      .init("device_class", .string("signal_strength")),
      .init("state_class", .string("measurement")),
      .init("expire_after", .int(expireAfter)),
      .init("availability_topic", .string(topics.availability)),
      .init("payload_available", .string("online")),
      .init("payload_not_available", .string("offline")),
      .init(
        "device",
        .object([
          .init("identifiers", .array([.string("blekit_id_\(id)")])),
          .init("name", .string("BLE ID \(id.prefix(8))")),
          .init("via_device", .string("blekit_gateway_\(topics.gateway)")),
        ])),
    ])
  }
}
