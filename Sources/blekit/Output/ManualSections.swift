// The manual page's sections that no declaration holds: environment, files, examples.

import ArgumentParsing

/// ENVIRONMENT, FILES, EXAMPLES and SEE ALSO for `blekit --generate-manual`; the commands,
/// options and EXIT STATUS come from the declarations and the exit-status table.
enum ManualSections {
  static let all: [ManualSection] = [environment, files, examples, seeAlso]

  static let environment = ManualSection(
    title: "ENVIRONMENT",
    blocks: [
      .item(
        "DBUS_SYSTEM_BUS_ADDRESS",
        "The system bus to reach bluetoothd on (default unix:path=/var/run/dbus/system_bus_socket)."
      )
    ])

  static let files = ManualSection(
    title: "FILES",
    blocks: [
      .item(
        "/etc/bluetooth/main.conf",
        "bluetoothd's configuration. Its [GATT] Channels setting decides whether a plain "
          + "peer's chunks arrive in a guaranteed order (receive exits 12 otherwise)."),
      .item(
        "/var/lib/bluetooth",
        "Where bluetoothd keeps the keys of paired devices (pair, unpair and trust change them)."),
    ])

  /// Sessions on two adapters of one machine, as README shows them (hci1 runs `blekit
  /// advertise`); only the long write is wrapped.
  static let examples = ManualSection(
    title: "EXAMPLES",
    blocks: [
      .paragraph("List the adapters:"),
      .example(
        """
        $ blekit adapters
        NAME  ADDRESS            TYPE    POWERED  DISCOVERING  ROLES               ALIAS
        hci0  00:AA:01:00:00:00  public  yes      no           central,peripheral  BlueZ 5.66
        hci1  00:AA:01:01:00:01  public  yes      no           central,peripheral  BlueZ 5.66
        """),
      .paragraph(
        "With blekit advertise --message \"hello from hci1\" running on hci1, subscribe to its "
          + "transfer characteristic, write a reply, and receive the message it now serves:"),
      .example(
        """
        $ blekit notify 00:AA:01:01:00:01 08590f7e-db05-467e-8757-72f6faeb13d4 --count 2 --text
        hello from hci1
        EOM
        $ blekit write 00:AA:01:01:00:01 08590f7e-db05-467e-8757-72f6faeb13d4 \\
            --text "hi back" --without-response
        $ blekit receive --from 00:AA:01:01:00:01
        hi back
        """),
      .paragraph("Read a characteristic as text, then a missing one (exit status 10):"),
      .example(
        """
        $ blekit read 00:AA:01:01:00:01 8eaae4b3-b2e1-4d09-b847-f21676e24277 --text
        2026-11-29T20:48:54.779Z
        $ blekit read 00:AA:01:01:00:01 2a99
        blekit: 00:AA:01:01:00:01 has no characteristic 2a99
        """),
      .paragraph(
        "Clone a device into a serve profile, then stand up its twin on another adapter:"),
      .example(
        """
        $ blekit clone 00:AA:01:01:00:01 -o twin.json
        $ blekit serve twin.json -a hci1
        """),
      .paragraph("Pair, trust and forget a device:"),
      .example(
        """
        $ blekit pair 00:AA:01:01:00:01 --confirm auto
        paired with 00:AA:01:01:00:01: paired yes, bonded yes, trusted no
        $ blekit trust 00:AA:01:01:00:01
        00:AA:01:01:00:01: paired yes, bonded yes, trusted yes
        $ blekit unpair 00:AA:01:01:00:01
        removed 00:AA:01:01:00:01 and its keys
        """),
    ])

  static let seeAlso = ManualSection(
    title: "SEE ALSO",
    blocks: [.paragraph("bluetoothd(8), bluetoothctl(1), btmon(1)")])
}
