#!/usr/bin/python3
# The lab's second emulated air: Bumble (PyPI `bumble`, Google's Python Bluetooth stack).
# Runs inside the lab VM (guest-init starts it for `scripts/lab run --bumble N`).
#
#   bumble-air.py --vhci N --listen HOST:PORT --address-prefix 00:BB:01 [--ready FILE]
#
# One Bumble LocalLink ("the Bumble air") holds:
#   - N controllers behind the guest kernel's /dev/vhci: each becomes an hciX that bluetoothd
#     manages like any adapter (public addresses PREFIX:00:00:00, PREFIX:00:00:01, ...);
#   - one fresh controller per TCP client of HOST:PORT: a Bumble host (a peer script, which
#     opens the HCI transport "tcp-client:HOST:PORT") gets its own controller on the same air
#     for as long as it stays connected (public address PREFIX:80:00:01, :02, ... in the order
#     they come); when it goes, its links are terminated and the
#     controller leaves the air.
# FILE is created once the N vhci controllers exist. Logs go to stderr.
#
# Three flaws of Bumble 0.0.236's emulated radio are worked around here, in subclasses (never in
# site-packages):
#   1. LocalLink.send_acl_data labels every LE data packet with the sending controller's random
#      address; the receiving controller files its links under the address the peer used to
#      connect, so a link the kernel made with its public address lost all its data. Here the
#      source is the sending link's own address.
#   2. The controller reports LE Connection Complete only. Linux 6.1 enables and waits for LE
#      Enhanced Connection Complete when the controller has LL Privacy or extended advertising
#      (Bumble has both), so its command queue stalled after each connection. Here the event is
#      sent in the enhanced form whenever the host enabled that event (LE event mask bit 9).
#   3. A disconnecting TCP client left its links open on the other side; here they end with
#      "remote user terminated connection".
# (The vhci transport also logs the kernel's adapter index read big-endian, "HCI index 256" for
# hci1; that is only a log line.)
import argparse
import asyncio
import logging
import sys

from bumble import hci, ll
from bumble.controller import Controller
from bumble.core import PhysicalTransport
from bumble.link import LocalLink
from bumble.transport import open_transport
from bumble.transport.common import StreamPacketSource

log = logging.getLogger("bumble-air")

LE_ENHANCED_CONNECTION_COMPLETE_MASK = 1 << 9  # subevent 0x0A
REMOTE_USER_TERMINATED = 0x13


class LabLink(LocalLink):
    """LocalLink whose LE data carries the sending link's own address (flaw 1)."""

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        if transport != PhysicalTransport.LE:
            return super().send_acl_data(sender_controller, destination_address, transport, data)
        connection = sender_controller.le_connections.get(destination_address)
        source = connection.self_address if connection else sender_controller.random_address
        destination = self.find_le_controller(destination_address)
        if destination is None:
            log.warning("ACL data for %s: no controller on the air", destination_address)
            return
        asyncio.get_running_loop().call_soon(
            destination.on_link_acl_data, source, transport, data)


class LabController(Controller):
    """Bumble's controller, with LE Enhanced Connection Complete (flaw 2)."""

    # Fewer, larger ACL fragments from the host: less work per notification under emulation.
    le_acl_data_packet_length = 251
    acl_data_packet_length = 251

    def send_hci_packet(self, packet):
        if (isinstance(packet, hci.HCI_LE_Connection_Complete_Event)
                and self.le_event_mask & LE_ENHANCED_CONNECTION_COMPLETE_MASK):
            packet = hci.HCI_LE_Enhanced_Connection_Complete_Event(
                status=packet.status,
                connection_handle=packet.connection_handle,
                role=packet.role,
                peer_address_type=packet.peer_address_type,
                peer_address=packet.peer_address,
                local_resolvable_private_address=hci.Address.ANY,
                peer_resolvable_private_address=hci.Address.ANY,
                connection_interval=packet.connection_interval,
                peripheral_latency=packet.peripheral_latency,
                supervision_timeout=packet.supervision_timeout,
                central_clock_accuracy=packet.central_clock_accuracy,
            )
        super().send_hci_packet(packet)

    def leave(self):
        """Terminate every LE link (the peers' hosts hear a disconnection), stop advertising,
        leave the air (flaw 3)."""
        for connection in list(self.le_connections.values()):
            connection.send_ll_control_pdu(ll.TerminateInd(REMOTE_USER_TERMINATED))
        self.le_connections.clear()
        self.le_legacy_advertiser.stop()
        for advertising_set in self.advertising_sets.values():
            advertising_set.stop()
        self.le_scan_enable = False
        self.link.remove_controller(self)


class PeerSink:
    """HCI packets from a peer's controller to the peer's host (its TCP connection)."""

    def __init__(self, transport):
        self.transport = transport

    def on_packet(self, packet):
        if not self.transport.is_closing():
            self.transport.write(packet)


class PeerProtocol(StreamPacketSource):
    """One TCP client: a Bumble host that gets a fresh controller on the air."""

    serial = 0

    def __init__(self, link, prefix):
        super().__init__()
        self.link = link
        self.prefix = prefix
        self.controller = None

    def connection_made(self, transport):
        PeerProtocol.serial += 1
        n = PeerProtocol.serial
        address = f"{self.prefix}:80:{n // 256 % 256:02X}:{n % 256:02X}"
        self.controller = LabController(
            f"peer{n}", host_source=self, host_sink=PeerSink(transport), link=self.link,
            public_address=address)
        log.info("peer %d connected: controller %s", n, address)

    def connection_lost(self, exc):
        if self.controller is not None:
            log.info("peer %s left", self.controller.name)
            self.controller.leave()
            self.controller = None


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vhci", type=int, default=1)
    parser.add_argument("--listen", default="127.0.0.1:9100")
    parser.add_argument("--address-prefix", default="00:BB:01")
    parser.add_argument("--ready")
    args = parser.parse_args()

    link = LabLink()
    adapters = []
    for i in range(args.vhci):
        transport = await open_transport("vhci")
        # hci.Address takes the printed order (most significant byte first).
        address = f"{args.address_prefix}:00:00:{i:02X}"
        adapters.append((transport, LabController(
            f"vhci{i}", host_source=transport.source, host_sink=transport.sink, link=link,
            public_address=address)))
        log.info("vhci controller %d: %s", i, address)
    host, port = args.listen.rsplit(":", 1)
    await asyncio.get_running_loop().create_server(
        lambda: PeerProtocol(link, args.address_prefix), host, int(port))
    log.info("listening for peers on %s", args.listen)
    if args.ready:
        open(args.ready, "w").close()
    await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
