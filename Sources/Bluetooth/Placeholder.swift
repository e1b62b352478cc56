// Placeholder until the Bluetooth layer lands.
