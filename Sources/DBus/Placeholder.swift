// Placeholder until the DBus layer lands.
