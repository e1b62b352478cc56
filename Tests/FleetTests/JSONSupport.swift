// Reading JSON text in the tests the way the aggregator reads a payload.

import Fleet
import JSON

/// `text` read as `FleetSighting.parsePayload` reads a payload (at most 32 levels deep).
func parseJSON(_ text: String) -> JSONValue? {
  FleetSighting.parsePayload(Array(text.utf8))
}
