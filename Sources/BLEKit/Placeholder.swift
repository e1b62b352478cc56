// Placeholder until the BLEKit layer lands.
