#!/usr/bin/python3
# Bumble (Google's Python Bluetooth host) as a non-BlueZ peer in the lab's Bumble air
# (`scripts/lab run --bumble N`, docs/lab.md). Each run opens the HCI transport $LAB_BUMBLE_HCI,
# where the air gives it a controller of its own, and acts as one of:
#
#   sensor  --message FILE [--message FILE2 ...] [--name N] [--address A] [--mtu M]
#       A sensor-like peripheral. Services: the transfer service
#       (E20A39F4-73F5-4BC4-A12F-17D1AD07A961) whose characteristic 08590F7E-... sends a FILE to
#       each subscriber (the first subscriber gets the first FILE, the next one the next, and
#       the last FILE is repeated) with the plain protocol (chunks of min(MTU-3, 512) bytes, then the
#       literal EOM) and takes replies written without response; Battery (180F/2A19, 87 %);
#       Heart Rate (180D/2A37 notify: 10 measurements, 70..79 bpm, every 0.2 s after a
#       subscription); a service of its own (SENSOR below) with a characteristic that
#       indicates 3 values ("indication 1".."indication 3"), a 600-byte read-only value
#       (bytes i % 251, read in pieces by a long read; bluetoothd keeps 512 of them), and a value
#       produced per read (400 bytes, "read #N:<N><N>..."; the pieces of one long read come from
#       the same value, so offsets are honoured). Its GATT server offers an MTU of --mtu (185,
#       a phone's; long reads then take several requests). Advertises the transfer service's UUID, with the name in the
#       scan response, and goes on advertising after each disconnection. Prints "ready
#       ADDRESS", then one line per event (connected, subscribed, sent, reply). Runs until
#       killed.
#   central --expect FILE --iterations N [--mtu 185] [--reply-prefix P]
#       A phone-like central running the seed's central flow N times: scan for the transfer
#       service, connect, request a larger MTU, subscribe to the plain characteristic,
#       reassemble until EOM, write a reply without response ("P<i>"), unsubscribe,
#       disconnect. blekit's peripheral sends each reply to the next subscriber, so iteration
#       i+1 expects iteration i's reply. Prints "iteration I exact yes|no BYTES bytes MTU M"
#       and ends with "central E/N exact"; exit 0 when all were exact.
#   pair-central --address A [--io-capability C] [--no-sc] [--no-bond] [--reconnect]
#   pair-peripheral [--io-capability C] [--no-sc] [--no-bond] [--name N]
#       Pairing with a non-BlueZ stack: the central connects to A (public; --random: random)
#       and pairs (then, with --reconnect, disconnects, connects again and encrypts with the
#       stored keys); the peripheral advertises and accepts. Both use their controller's
#       public address, the identity address they hand out (the peripheral prints it:
#       "ready ADDRESS"). Numeric comparisons are confirmed; a passkey to
#       display is printed ("passkey NNNNNN") and one to enter is read from $LAB_SHARED/passkey.
#       Prints "paired sc=yes|no bonded=yes|no" or "pairing failed: ...".
#   hostile --control FILE [--address A]
#       A peer that misbehaves, for Tests/Lab/hostile.sh: one process for every case (Python
#       starts slowly under emulation). The case is the last line of FILE, read at each
#       connection: KIND [--mtu M] (the MTU its GATT server offers, default 517) and
#         chunks --message F [--chunk N] [--after N] [--no-eom]
#                              on subscription, F in raw notifications of --chunk bytes
#                              (default min(MTU-3, 512); more is an ATT violation committed on
#                              purpose), all queued at once (a flood), then EOM (unless
#                              --no-eom), then --after more chunks past the EOM
#         disconnect-at-connect        drops each link as soon as it is up
#         disconnect-at-discovery      drops the link at the first service discovery request
#         malformed-discovery          answers service discovery with a malformed response
#                                      (a length field that does not divide the data)
#         connect-flood --target A [--count N] [--timeout S]
#                              connects to A as a central N times as fast as it can,
#                              disconnecting each time; prints "connects C/N"
#         silent-central --target A [--hold S]
#                              connects to A as a central, subscribes to the Health
#                              Thermometer's Temperature Measurement (2a1c) for indications
#                              and never confirms one; prints "indication N" for each, then
#                              after S seconds (default 45) "silent-central: N indications,
#                              none confirmed, link up|down" and disconnects
#       It serves the transfer service like `sensor` and advertises it all along. Prints
#       "ready ADDRESS", "case LINE" when the case changes, and one line per event.
#   quirks [--name N] [--address A]
#       A peripheral with the notification quirks of real devices, for
#       Tests/Lab/notify-quirks.sh. Its service QUIRK_SERVICE (6E7A0100-...) has one
#       characteristic per kind and quirk, 6E7A01KQ-...: K = 1 notify only, 2 indicate only,
#       3 notify and indicate (it sends indications; bluetoothd enables notifications for such
#       a characteristic, and a device may send indications anyway); Q = 1 "early": the value
#       "early" goes out before the Write Response to the CCCD write that subscribed (raw ATT,
#       queued ahead of the response), then "then"; 2 "empty": "a", an empty value, "b";
#       3 "early-empty": an empty value before the Write Response, then "after". The transfer
#       service's characteristic sends "first half|", an empty value, "second half", then EOM
#       (plain framing). Values after the subscription wait for a second without a new
#       subscription, then go out one characteristic at a time (one unconfirmed indication at
#       most, as ATT requires).
#       Prints "ready ADDRESS" and one line per event (subscribed, sent).
#   secure --pairing-mode FILE [--name N] [--address A]
#       A peripheral with a value that needs encryption, for the explore checks of
#       Tests/Lab/notify-quirks.sh. Its service SECURE_SERVICE (6E7A0200-...) has an open value
#       (6E7A0201, "open value"), then one whose read needs an encrypted link (6E7A0202,
#       "secret value"; unencrypted, Bumble answers ATT error 0x0f, Insufficient Encryption),
#       then comes Battery (180F/2A19, 87 %). Like a device with a pairing button, it accepts a
#       pairing (just works, LE Secure Connections, bonded: keys kept for the next connection)
#       only while FILE exists, and refuses it otherwise (SMP Pairing Not Supported). Advertises
#       its name and goes on advertising after each disconnection. Prints "ready ADDRESS", then
#       one line per event (connected, disconnected, pairing accepted or refused, paired).
#   clone-source [--name N] [--address A]
#       A sensor-like peripheral for Tests/Lab/clone-bumble.sh to clone: Battery (180F/2A19,
#       read and notify, 87, notified every second while subscribed), Heart Rate (180D: 2A37
#       measurement, notify, 06 48 then 06 49 then 06 4A in turn every 500 ms while
#       subscribed; 2A38 body sensor location, read, 01), and CLONE_SERVICE (6E7A0300-...)
#       with a 300-byte value (6E7A0301, bytes i*7 mod 256) and one whose read needs an
#       encrypted link (6E7A0302, "secret"; it never pairs, as a device outside its pairing
#       mode). Advertises its name, Heart Rate and manufacturer data FFFF 0102, again after
#       each disconnection. Prints "ready ADDRESS" and one line per event.
import argparse
import asyncio
import os
import sys
import time

from bumble import att, hci
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.keys import JsonKeyStore
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

TRANSFER_SERVICE = "E20A39F4-73F5-4BC4-A12F-17D1AD07A961"
TRANSFER_CHAR = "08590F7E-DB05-467E-8757-72F6FAEB13D4"
SENSOR_SERVICE = "6E7A0001-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
INDICATE_CHAR = "6E7A0002-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
LONG_CHAR = "6E7A0003-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
PER_READ_CHAR = "6E7A0004-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
LONG_VALUE = bytes(i % 251 for i in range(600))
PER_READ_LENGTH = 400


def say(text):
    print(text, flush=True)


def uuid_le(uuid):
    """The 128-bit UUID's bytes as they travel in an advertisement (little-endian)."""
    return bytes(reversed(bytes.fromhex(uuid.replace("-", ""))))


def ad_structure(kind, payload):
    return bytes([len(payload) + 1, kind]) + payload


def advertised_uuids(data):
    """128-bit service UUIDs (as upper-case strings) in raw advertising data."""
    found, i = [], 0
    while i < len(data) and data[i]:
        length, kind = data[i], data[i + 1]
        payload = data[i + 2:i + 1 + length]
        if kind in (0x06, 0x07):
            for j in range(0, len(payload) - 15, 16):
                h = bytes(reversed(payload[j:j + 16])).hex().upper()
                found.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
        i += 1 + length
    return found


async def open_device(name, address):
    transport = await open_transport(os.environ.get("LAB_BUMBLE_HCI", "tcp-client:127.0.0.1:9100"))
    device = Device.with_hci(name, hci.Address(address), transport.source, transport.sink)
    return transport, device


# -----------------------------------------------------------------------------------------
# sensor


class PerReadValue:
    """A value made anew at each read; the Read Blob requests of one long read get pieces of
    the same value. Bumble hands the callback no offset (it slices the value itself), so a long
    read is recognised by its length: a value of L bytes at MTU m takes L // (m-1) + 1 reads
    (BlueZ reads on until a piece is shorter than m-1)."""

    def __init__(self):
        self.count = 0
        self.value = b""
        self.left = 0

    def read(self, connection):
        if self.left <= 0:
            self.count += 1
            self.value = (f"read #{self.count}:" + f"<{self.count}>" * PER_READ_LENGTH).encode()
            self.value = self.value[:PER_READ_LENGTH]
            self.left = len(self.value) // (connection.att_mtu - 1) + 1
        self.left -= 1
        return self.value


def not_readable(connection):
    # Without a read function Bumble raises inside its server and sends no response at all,
    # so bluetoothd's read waits out the ATT timeout and drops the link.
    raise att.ATT_Error(att.ATT_READ_NOT_PERMITTED_ERROR)


async def sensor(args):
    messages = [open(path, "rb").read() for path in args.message]
    subscriptions = [0]
    transport, device = await open_device(args.name, args.address)
    device.gatt_server.max_mtu = args.mtu
    async with transport:
        transfer = Characteristic(
            TRANSFER_CHAR,
            Characteristic.Properties.NOTIFY | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.WRITEABLE,
            CharacteristicValue(read=not_readable, write=lambda connection, value: say(
                f"reply {bytes(value).decode(errors='replace')}")))
        battery = Characteristic(
            "2A19", Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
            Characteristic.READABLE, bytes([87]))
        heart_rate = Characteristic(
            "2A37", Characteristic.Properties.NOTIFY, Characteristic.READABLE, bytes([0, 60]))
        indicate = Characteristic(
            INDICATE_CHAR, Characteristic.Properties.INDICATE, Characteristic.READABLE, b"")
        per_read = PerReadValue()
        device.add_services([
            Service(TRANSFER_SERVICE, [transfer]),
            Service("180F", [battery]),
            Service("180D", [heart_rate]),
            Service(SENSOR_SERVICE, [
                indicate,
                Characteristic(LONG_CHAR, Characteristic.Properties.READ,
                               Characteristic.READABLE, LONG_VALUE),
                Characteristic(PER_READ_CHAR, Characteristic.Properties.READ,
                               Characteristic.READABLE, CharacteristicValue(read=per_read.read)),
            ]),
        ])

        async def send_message(connection):
            message = messages[min(subscriptions[0], len(messages) - 1)]
            subscriptions[0] += 1
            size = min(connection.att_mtu - 3, 512)
            for i in range(0, len(message), size):
                await device.notify_subscriber(connection, transfer, message[i:i + size], force=True)
            await device.notify_subscriber(connection, transfer, b"EOM", force=True)
            say(f"sent {len(message)} bytes in chunks of {size}")

        async def send_heart_rate(connection):
            for i in range(10):
                await device.notify_subscriber(connection, heart_rate, bytes([0, 70 + i]), force=True)
                await asyncio.sleep(0.2)

        async def send_indications(connection):
            for i in range(1, 4):
                await device.indicate_subscriber(connection, indicate, f"indication {i}".encode(),
                                                 force=True)
            say("indicated 3 values")

        def on_subscription(connection, characteristic, notify_enabled, indicate_enabled):
            if not (notify_enabled or indicate_enabled):
                return
            say(f"subscribed {characteristic.uuid} mtu {connection.att_mtu}")
            if characteristic is transfer:
                asyncio.ensure_future(send_message(connection))
            elif characteristic is heart_rate:
                asyncio.ensure_future(send_heart_rate(connection))
            elif characteristic is indicate:
                asyncio.ensure_future(send_indications(connection))

        device.on("characteristic_subscription", on_subscription)
        device.on("connection", lambda connection: say(f"connected {connection.peer_address}"))
        await device.power_on()
        advertising = ad_structure(0x01, bytes([0x06])) + ad_structure(0x07, uuid_le(TRANSFER_SERVICE))
        scan_response = (ad_structure(0x09, args.name.encode())
                         + ad_structure(0x03, bytes.fromhex("0f180d18")))
        await device.start_advertising(auto_restart=True, advertising_data=advertising,
                                       scan_response_data=scan_response)
        say(f"ready {args.address}")
        await asyncio.get_running_loop().create_future()


# -----------------------------------------------------------------------------------------
# central


async def find_transfer_peripheral(device, timeout):
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(advertisement):
        if not found.done() and TRANSFER_SERVICE in advertised_uuids(advertisement.data_bytes):
            found.set_result(advertisement.address)

    device.on("advertisement", on_advertisement)
    await device.start_scanning(filter_duplicates=False)
    try:
        return await asyncio.wait_for(found, timeout)
    finally:
        device.remove_listener("advertisement", on_advertisement)
        await device.stop_scanning()


def step(text):
    print(f"{time.monotonic():.1f} {text}", file=sys.stderr, flush=True)


async def central_iteration(device, expect, reply, args):
    address = await find_transfer_peripheral(device, args.timeout)
    step(f"found {address}")
    connection = await device.connect(address, timeout=args.timeout)
    step("connected")
    chunks = []
    done = asyncio.Event()

    def on_value(value):
        if bytes(value) == b"EOM":
            done.set()
        else:
            chunks.append(bytes(value))

    async with Peer(connection) as peer:
        mtu = await peer.request_mtu(args.mtu)
        step(f"MTU {mtu}")
        await peer.discover_service(UUID(TRANSFER_SERVICE))
        await peer.discover_characteristics()
        characteristic = peer.get_characteristics_by_uuid(UUID(TRANSFER_CHAR))[0]
        await peer.subscribe(characteristic, on_value)
        step("subscribed")
        try:
            await asyncio.wait_for(done.wait(), args.timeout)
        finally:
            step(f"{len(chunks)} values, sizes {sorted(set(map(len, chunks)))}")
        await peer.write_value(characteristic, reply, with_response=False)
        await asyncio.sleep(0.3)  # let the write go out before the unsubscribe and disconnect
        await peer.unsubscribe(characteristic, on_value)
    await connection.disconnect()
    message = b"".join(chunks)
    return message == expect, len(message), mtu


async def central(args):
    expect = open(args.expect, "rb").read()
    transport, device = await open_device(args.name, args.address)
    # A phone uses one MTU in both roles. Bumble's server would offer 517 to bluetoothd's own
    # MTU exchange while its client asks for --mtu; bluetoothd 5.66 then keeps the larger one
    # for notifications (docs/lab.md).
    device.gatt_server.max_mtu = args.server_mtu or args.mtu
    exact = 0
    async with transport:
        await device.power_on()
        for i in range(1, args.iterations + 1):
            reply = f"{args.reply_prefix}{i}".encode()
            try:
                ok, length, mtu = await central_iteration(device, expect, reply, args)
            except Exception as error:  # noqa: BLE001 - the failure is the result
                say(f"iteration {i} failed: {type(error).__name__}: {error}")
                ok, length, mtu = False, -1, 0
            exact += ok
            say(f"iteration {i} exact {'yes' if ok else 'no'} {length} bytes MTU {mtu}")
            expect = reply
            await asyncio.sleep(0.5)
    say(f"central {exact}/{args.iterations} exact")
    return 0 if exact == args.iterations else 1


# -----------------------------------------------------------------------------------------
# pairing


class Delegate(PairingDelegate):
    """Confirms comparisons, prints a passkey to display, takes one to enter from a file."""

    async def confirm(self, auto=False):
        say("confirm just-works" if auto else "confirm")
        return True

    async def compare_numbers(self, number, digits):
        say(f"compare {number:0{digits}d}")
        return True

    async def display_number(self, number, digits):
        say(f"passkey {number:0{digits}d}")

    async def get_number(self):
        path = os.path.join(os.environ.get("LAB_SHARED", "/tmp"), "passkey")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                text = open(path).read().strip()
                if text:
                    say(f"entered passkey {text}")
                    return int(text)
            except FileNotFoundError:
                pass
            await asyncio.sleep(0.2)
        return None


def pairing_setup(device, args):
    capability = getattr(PairingDelegate.IoCapability, args.io_capability)
    device.keystore = JsonKeyStore(namespace=None, filename=os.path.join(
        os.environ.get("HOME", "/tmp"), f"bumble-keys-{args.name}.json"))
    device.pairing_config_factory = lambda connection: PairingConfig(
        sc=not args.no_sc, mitm=capability != PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT,
        bonding=not args.no_bond, delegate=Delegate(io_capability=capability))


async def pairing_result(device, connection, keys):
    """What the pairing gave: LE Secure Connections (one LTK) or legacy (an LTK per role), and
    whether the keys were kept (bonding)."""
    await asyncio.sleep(0.5)  # the keystore is written after the pairing event
    sc = keys is not None and keys.ltk is not None
    stored = await device.keystore.get(str(connection.peer_address)) if device.keystore else None
    return (f"paired sc={'yes' if sc else 'no'} bonded={'yes' if stored else 'no'} "
            f"encrypted={'yes' if connection.is_encrypted else 'no'}")


async def pair_central(args):
    transport, device = await open_device(args.name, args.address_self)
    async with transport:
        pairing_setup(device, args)
        await device.power_on()
        target = hci.Address(args.address, hci.Address.RANDOM_DEVICE_ADDRESS if args.random
                             else hci.Address.PUBLIC_DEVICE_ADDRESS)
        # Its controller's public address, which is also the identity address it hands out
        # when pairing (so the keys are found again on a reconnection).
        connection = await device.connect(target, timeout=args.timeout,
                                          own_address_type=hci.OwnAddressType.PUBLIC)
        got = {}
        connection.on("pairing", lambda keys: got.setdefault("keys", keys))
        try:
            await connection.pair()
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001
            say(f"pairing failed: {type(error).__name__}: {error}")
            return 1
        say(await pairing_result(device, connection, got.get("keys")))
        if args.reconnect:
            await connection.disconnect()
            await asyncio.sleep(1)
            connection = await device.connect(target, timeout=args.timeout,
                                              own_address_type=hci.OwnAddressType.PUBLIC)
            try:
                await connection.encrypt()
                say(f"reconnected encrypted={'yes' if connection.is_encrypted else 'no'} with stored keys")
            except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001
                say(f"reconnect encryption failed: {type(error).__name__}: {error}")
                return 1
        await asyncio.sleep(0.5)
        await connection.disconnect()
    return 0


async def pair_peripheral(args):
    transport, device = await open_device(args.name, args.address_self)
    async with transport:
        pairing_setup(device, args)
        done = asyncio.get_running_loop().create_future()

        def on_connection(connection):
            say(f"connected {connection.peer_address}")
            connection.on("pairing", lambda keys: done.done() or done.set_result(
                (connection, keys, None)))
            connection.on("pairing_failure", lambda reason: done.done() or done.set_result(
                (connection, None, reason)))

        device.on("connection", on_connection)
        await device.power_on()
        advertising = ad_structure(0x01, bytes([0x06])) + ad_structure(0x09, args.name.encode())
        await device.start_advertising(auto_restart=True, advertising_data=advertising,
                                       own_address_type=hci.OwnAddressType.PUBLIC)
        say(f"ready {device.public_address.to_string(False)}")
        connection, keys, failure = await asyncio.wait_for(done, args.timeout)
        if failure is not None:
            say(f"pairing failed: {failure}")
            return 1
        say(await pairing_result(device, connection, keys))
        await asyncio.get_running_loop().create_future()


# -----------------------------------------------------------------------------------------
# hostile


def notification(handle, value):
    """A raw ATT Handle Value Notification: no size check, no subscription check."""
    return bytes([att.Opcode.ATT_HANDLE_VALUE_NOTIFICATION]) + handle.to_bytes(2, "little") + value


def hostile_case_parser():
    parser = argparse.ArgumentParser(prog="hostile case", exit_on_error=False)
    parser.add_argument("kind", choices=[
        "chunks", "disconnect-at-connect", "disconnect-at-discovery", "malformed-discovery",
        "connect-flood", "silent-central"])
    parser.add_argument("--message", help="chunks: the file to send")
    parser.add_argument("--chunk", type=int, help="chunks: bytes per notification")
    parser.add_argument("--after", type=int, default=0, help="chunks: notifications after EOM")
    parser.add_argument("--no-eom", action="store_true", help="chunks: never send EOM")
    parser.add_argument("--mtu", type=int, default=517, help="the MTU its GATT server offers")
    parser.add_argument("--target", help="connect-flood: the address to connect to")
    parser.add_argument("--count", type=int, default=20, help="connect-flood: how many")
    parser.add_argument("--timeout", type=float, default=10, help="connect-flood: per connect")
    parser.add_argument("--hold", type=float, default=45, help="silent-central: seconds")
    return parser


async def hostile(args):
    """One Bumble process for every case (Python starts slowly under emulation): the case is
    the last line of the --control file, read at each connection (a retried connect gets the
    same behaviour) and polled for connect-flood."""
    parse_case = hostile_case_parser()
    current = {"line": None, "case": None}

    def case():
        try:
            line = open(args.control).read().strip().splitlines()[-1]
        except (OSError, IndexError):
            line = "chunks"
        if line != current["line"]:
            current["line"] = line
            current["case"] = parse_case.parse_args(line.split())
            say(f"case {line}")
        return current["case"]

    transport, device = await open_device(args.name, args.address)
    async with transport:
        transfer = Characteristic(
            TRANSFER_CHAR,
            Characteristic.Properties.NOTIFY | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.WRITEABLE,
            CharacteristicValue(read=not_readable, write=lambda connection, value: say(
                f"reply {bytes(value).decode(errors='replace')}")))
        device.add_services([Service(TRANSFER_SERVICE, [transfer])])
        server = device.gatt_server
        answer = server.on_gatt_pdu

        def on_request(bearer, pdu):
            if pdu.op_code == att.Opcode.ATT_READ_BY_GROUP_TYPE_REQUEST:
                if case().kind == "disconnect-at-discovery":
                    say("discovery request: disconnecting")
                    asyncio.ensure_future(bearer.disconnect())
                    return
                if case().kind == "malformed-discovery":
                    # Each entry claims 6 bytes (start, end, 16-bit UUID) but 7 follow.
                    say("discovery request: answering with a malformed response")
                    server.send_gatt_pdu(bearer, bytes([
                        att.Opcode.ATT_READ_BY_GROUP_TYPE_RESPONSE, 6,
                        0x01, 0x00, 0xff, 0xff, 0x0d, 0x18, 0x00]))
                    return
            answer(bearer, pdu)

        server.on_gatt_pdu = on_request

        def send_chunks(connection, c):
            message = open(c.message, "rb").read() if c.message else b""
            size = c.chunk or min(connection.att_mtu - 3, 512)
            values = [message[i:i + size] for i in range(0, len(message), size)]
            if not c.no_eom:
                values.append(b"EOM")
            values += [(b"after EOM %d " % i + bytes(size))[:size] for i in range(c.after)]
            for value in values:
                device.send_l2cap_pdu(connection.handle, att.ATT_CID,
                                      notification(transfer.handle, value))
            say(f"queued {len(values)} notifications of up to {size} bytes "
                f"({len(message)} message bytes, eom {'no' if c.no_eom else 'yes'}, "
                f"{c.after} after it) at MTU {connection.att_mtu}")

        def on_subscription(connection, characteristic, notify_enabled, indicate_enabled):
            c = case()
            if notify_enabled and characteristic is transfer and c.kind == "chunks":
                say(f"subscribed mtu {connection.att_mtu}")
                # After the Write Response to the CCCD (sent once the write is handled): a
                # client that has not seen it yet drops notifications (and bluetoothd 5.66 then
                # answered AcquireNotify only after the whole flood).
                asyncio.get_running_loop().call_later(0.5, send_chunks, connection, c)

        def on_connection(connection):
            c = case()
            say(f"connected {connection.peer_address}")
            if c.kind == "disconnect-at-connect":
                asyncio.ensure_future(connection.disconnect())

        device.on("characteristic_subscription", on_subscription)
        device.on("connection", on_connection)
        await device.power_on()
        advertising = ad_structure(0x01, bytes([0x06])) + ad_structure(0x07, uuid_le(TRANSFER_SERVICE))
        await device.start_advertising(auto_restart=True, advertising_data=advertising,
                                       scan_response_data=ad_structure(0x09, args.name.encode()))
        say(f"ready {args.address}")
        flooded = None
        while True:
            c = case()
            server.max_mtu = c.mtu  # what the server offers in the next MTU exchange
            if c.kind in ("connect-flood", "silent-central") and flooded != current["line"]:
                flooded = current["line"]
                await (connect_flood if c.kind == "connect-flood" else silent_central)(device, c)
            await asyncio.sleep(0.2)


async def connect_flood(device, c):
    target = hci.Address(c.target, hci.Address.PUBLIC_DEVICE_ADDRESS)
    connects = 0
    for i in range(c.count):
        try:
            connection = await device.connect(target, timeout=c.timeout)
            connects += 1
            await connection.disconnect()
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001
            say(f"connect {i + 1} failed: {type(error).__name__}: {error}")
    say(f"connects {connects}/{c.count}")


async def silent_central(device, c):
    """A central that takes indications and never confirms them (ATT requires it to)."""
    target = hci.Address(c.target, hci.Address.PUBLIC_DEVICE_ADDRESS)
    try:
        connection = await device.connect(target, timeout=30)
    except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001
        say(f"silent-central: connect failed: {type(error).__name__}: {error}")
        return
    received = []
    down = asyncio.Event()
    connection.on("disconnection", lambda reason: down.set())
    try:
        peer = Peer(connection)
        # Bumble confirms each indication after handing it over: that step is left out.
        peer.gatt_client.send_confirmation = lambda confirmation: None
        await peer.discover_service(UUID.from_16_bits(0x1809))
        await peer.discover_characteristics()
        measurement = peer.get_characteristics_by_uuid(UUID.from_16_bits(0x2A1C))[0]

        def on_value(value):
            received.append(bytes(value))
            say(f"indication {len(received)}")

        await peer.subscribe(measurement, on_value, prefer_notify=False)
        say("silent-central: subscribed for indications")
        try:
            await asyncio.wait_for(down.wait(), c.hold)
        except asyncio.TimeoutError:
            pass
    except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001
        say(f"silent-central: {type(error).__name__}: {error}")
    say(f"silent-central: {len(received)} indications, none confirmed, "
        f"link {'down' if down.is_set() else 'up'}")
    if not down.is_set():
        try:
            await connection.disconnect()
        except (Exception, asyncio.CancelledError):  # noqa: BLE001
            pass


# -----------------------------------------------------------------------------------------
# quirks


QUIRK_SERVICE = "6E7A0100-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
QUIRK_KINDS = {1: "notify", 2: "indicate", 3: "notify+indicate"}
# quirk: (name, the value sent before the Write Response or None, the values sent after)
QUIRKS = {1: ("early", b"early", [b"then"]), 2: ("empty", None, [b"a", b"", b"b"]),
          3: ("early-empty", b"", [b"after"])}
QUIRK_TRANSFER = [b"first half|", b"", b"second half", b"EOM"]


def quirk_uuid(kind, quirk):
    return f"6E7A01{kind}{quirk}-5D3B-4C1E-9A0B-1A2B3C4D5E6F"


async def quirks(args):
    transport, device = await open_device(args.name, args.address)
    async with transport:
        characteristics = {}
        for kind in QUIRK_KINDS:
            properties = {1: Characteristic.Properties.NOTIFY,
                          2: Characteristic.Properties.INDICATE,
                          3: Characteristic.Properties.NOTIFY | Characteristic.Properties.INDICATE}[kind]
            for quirk in QUIRKS:
                characteristic = Characteristic(
                    quirk_uuid(kind, quirk), properties, Characteristic.READABLE, b"")
                characteristics[characteristic] = (kind, quirk)
        transfer = Characteristic(
            TRANSFER_CHAR,
            Characteristic.Properties.NOTIFY | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.WRITEABLE,
            CharacteristicValue(read=not_readable, write=lambda connection, value: say(
                f"reply {bytes(value).decode(errors='replace')}")))
        device.add_services([Service(QUIRK_SERVICE, list(characteristics)),
                             Service(TRANSFER_SERVICE, [transfer])])

        # Later values wait for a quiet second after the last subscription and then go out one
        # characteristic after another: ATT allows one unconfirmed indication at a time, and a
        # raw early indication sent while one of Bumble's is unconfirmed takes its confirmation
        # (Bumble then fails on the second one and the link breaks; seen in the first runs).
        queue, timer, indicating = [], [None], [0]

        async def flush():
            while queue:
                connection, characteristic, indicate, values = queue.pop(0)
                for value in values:
                    if indicate:
                        indicating[0] += 1
                        try:
                            await device.indicate_subscriber(connection, characteristic, value,
                                                             force=True)
                        finally:
                            indicating[0] -= 1
                    else:
                        await device.notify_subscriber(connection, characteristic, value, force=True)
                say(f"sent {characteristic.uuid} {[v.decode() for v in values]}")

        def send_later(connection, characteristic, indicate, values):
            queue.append((connection, characteristic, indicate, values))
            if timer[0] is not None:
                timer[0].cancel()
            timer[0] = asyncio.get_running_loop().call_later(
                1.0, lambda: asyncio.ensure_future(flush()))

        def on_subscription(connection, characteristic, notify_enabled, indicate_enabled):
            if not (notify_enabled or indicate_enabled):
                return
            say(f"subscribed {characteristic.uuid} notify {notify_enabled} indicate {indicate_enabled}")
            if characteristic is transfer:
                send_later(connection, transfer, False, QUIRK_TRANSFER)
                return
            if characteristic not in characteristics:
                return
            kind, quirk = characteristics[characteristic]
            name, early, later = QUIRKS[quirk]
            indicate = kind != 1
            if early is not None and indicate and indicating[0]:
                # Not early after all (an indication is unconfirmed): say so, send it first.
                say(f"deferred {characteristic.uuid} {early.decode()!r}: an indication is unconfirmed")
                later = [early] + later
            elif early is not None:
                # This handler runs inside the CCCD write, before Bumble sends the Write
                # Response: a PDU sent now goes out ahead of it.
                opcode = (att.Opcode.ATT_HANDLE_VALUE_INDICATION if indicate
                          else att.Opcode.ATT_HANDLE_VALUE_NOTIFICATION)
                device.send_l2cap_pdu(connection.handle, att.ATT_CID,
                                      bytes([opcode]) + characteristic.handle.to_bytes(2, "little")
                                      + early)
                say(f"sent {characteristic.uuid} {early.decode()!r} before the write response")
            send_later(connection, characteristic, indicate, later)

        device.on("characteristic_subscription", on_subscription)
        device.on("connection", lambda connection: say(f"connected {connection.peer_address}"))
        await device.power_on()
        advertising = ad_structure(0x01, bytes([0x06])) + ad_structure(0x07, uuid_le(TRANSFER_SERVICE))
        await device.start_advertising(auto_restart=True, advertising_data=advertising,
                                       scan_response_data=ad_structure(0x09, args.name.encode()))
        say(f"ready {args.address}")
        await asyncio.get_running_loop().create_future()


# -----------------------------------------------------------------------------------------
# secure


SECURE_SERVICE = "6E7A0200-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
SECURE_OPEN_CHAR = "6E7A0201-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
SECURE_SECRET_CHAR = "6E7A0202-5D3B-4C1E-9A0B-1A2B3C4D5E6F"


class PairingModeDelegate(Delegate):
    """Accepts a pairing only while the pairing-mode file exists (a device's pairing button)."""

    def __init__(self, pairing_mode, **kwargs):
        super().__init__(**kwargs)
        self.pairing_mode = pairing_mode

    async def accept(self):
        accepted = os.path.exists(self.pairing_mode)
        say("pairing accepted" if accepted else "pairing refused: not in pairing mode")
        return accepted


async def secure(args):
    transport, device = await open_device(args.name, args.address)
    async with transport:
        device.keystore = JsonKeyStore(namespace=None, filename=os.path.join(
            os.environ.get("HOME", "/tmp"), f"bumble-keys-{args.name}.json"))
        capability = PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT
        device.pairing_config_factory = lambda connection: PairingConfig(
            sc=True, mitm=False, bonding=True,
            delegate=PairingModeDelegate(args.pairing_mode, io_capability=capability))
        device.add_services([
            Service(SECURE_SERVICE, [
                Characteristic(SECURE_OPEN_CHAR, Characteristic.Properties.READ,
                               Characteristic.READABLE, b"open value"),
                Characteristic(SECURE_SECRET_CHAR, Characteristic.Properties.READ,
                               Characteristic.READ_REQUIRES_ENCRYPTION, b"secret value"),
            ]),
            Service(UUID.from_16_bits(0x180F), [
                Characteristic(UUID.from_16_bits(0x2A19), Characteristic.Properties.READ,
                               Characteristic.READABLE, bytes([87])),
            ]),
        ])

        def on_connection(connection):
            say(f"connected {connection.peer_address}")
            connection.on("disconnection", lambda reason: say(f"disconnected {reason}"))
            connection.on("pairing", lambda keys: say("paired"))
            connection.on("pairing_failure", lambda reason: say(f"pairing failed: {reason}"))
            connection.on("connection_encryption_change",
                          lambda: say(f"encryption {connection.encryption}"))

        device.on("connection", on_connection)
        await device.power_on()
        advertising = ad_structure(0x01, bytes([0x06])) + ad_structure(0x09, args.name.encode())
        await device.start_advertising(auto_restart=True, advertising_data=advertising)
        say(f"ready {args.address}")
        await asyncio.get_running_loop().create_future()


# -----------------------------------------------------------------------------------------
# clone-source


CLONE_SERVICE = "6E7A0300-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
CLONE_LONG_CHAR = "6E7A0301-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
CLONE_SECRET_CHAR = "6E7A0302-5D3B-4C1E-9A0B-1A2B3C4D5E6F"
CLONE_LONG_VALUE = bytes((i * 7) % 256 for i in range(300))
HEART_RATES = [bytes([0x06, 0x48]), bytes([0x06, 0x49]), bytes([0x06, 0x4A])]


async def clone_source(args):
    transport, device = await open_device(args.name, args.address)
    async with transport:
        # No pairing: Bumble answers a pairing request with Pairing Not Supported.
        device.pairing_config_factory = lambda connection: PairingConfig(
            sc=True, mitm=False, bonding=False,
            delegate=PairingModeDelegate("/nonexistent", io_capability=(
                PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT)))
        battery = Characteristic(UUID.from_16_bits(0x2A19),
                                 Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
                                 Characteristic.READABLE, bytes([87]))
        measurement = Characteristic(UUID.from_16_bits(0x2A37), Characteristic.Properties.NOTIFY,
                                     Characteristic.READABLE, HEART_RATES[0])
        device.add_services([
            Service(UUID.from_16_bits(0x180F), [battery]),
            Service(UUID.from_16_bits(0x180D), [
                measurement,
                Characteristic(UUID.from_16_bits(0x2A38), Characteristic.Properties.READ,
                               Characteristic.READABLE, bytes([0x01])),
            ]),
            Service(CLONE_SERVICE, [
                Characteristic(CLONE_LONG_CHAR, Characteristic.Properties.READ,
                               Characteristic.READABLE, CLONE_LONG_VALUE),
                Characteristic(CLONE_SECRET_CHAR, Characteristic.Properties.READ,
                               Characteristic.READ_REQUIRES_ENCRYPTION, b"secret"),
            ]),
        ])

        async def notifier():
            tick = 0
            while True:
                await asyncio.sleep(0.5)
                tick += 1
                try:
                    await device.notify_subscribers(measurement, HEART_RATES[tick % 3])
                    if tick % 2 == 0:
                        await device.notify_subscribers(battery, bytes([87]))
                except Exception as error:  # a link going down mid-notification
                    say(f"notify failed: {error}")

        def on_connection(connection):
            say(f"connected {connection.peer_address}")
            connection.on("disconnection", lambda reason: say(f"disconnected {reason}"))
            connection.on("pairing_failure", lambda reason: say(f"pairing failed: {reason}"))

        device.on("connection", on_connection)
        await device.power_on()
        advertising = (ad_structure(0x01, bytes([0x06])) + ad_structure(0x03, bytes([0x0D, 0x18]))
                       + ad_structure(0xFF, bytes([0xFF, 0xFF, 0x01, 0x02]))
                       + ad_structure(0x09, args.name.encode()))
        await device.start_advertising(auto_restart=True, advertising_data=advertising)
        say(f"ready {args.address}")
        await notifier()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sensor")
    s.add_argument("--message", required=True, action="append")
    s.add_argument("--name", default="bumble-sensor")
    s.add_argument("--address", default="C0:FF:EE:00:00:01")
    s.add_argument("--mtu", type=int, default=185)
    c = sub.add_parser("central")
    c.add_argument("--expect", required=True)
    c.add_argument("--iterations", type=int, default=3)
    c.add_argument("--mtu", type=int, default=185)
    c.add_argument("--server-mtu", type=int, help="the MTU its GATT server offers (default --mtu)")
    c.add_argument("--reply-prefix", default="reply from the Bumble central, iteration ")
    c.add_argument("--name", default="bumble-phone")
    c.add_argument("--address", default="C0:FF:EE:00:00:02")
    c.add_argument("--timeout", type=float, default=30)
    for name in ("pair-central", "pair-peripheral"):
        p = sub.add_parser(name)
        p.add_argument("--io-capability", default="NO_OUTPUT_NO_INPUT",
                       choices=["NO_OUTPUT_NO_INPUT", "DISPLAY_OUTPUT_ONLY",
                                "DISPLAY_OUTPUT_AND_YES_NO_INPUT", "KEYBOARD_INPUT_ONLY",
                                "DISPLAY_OUTPUT_AND_KEYBOARD_INPUT"])
        p.add_argument("--no-sc", action="store_true", help="legacy pairing")
        p.add_argument("--no-bond", action="store_true")
        p.add_argument("--timeout", type=float, default=60)
        p.add_argument("--name", default=f"bumble-{name}")
        p.add_argument("--address-self", default="C0:FF:EE:00:00:03")
        if name == "pair-central":
            p.add_argument("--address", required=True)
            p.add_argument("--reconnect", action="store_true")
            p.add_argument("--random", action="store_true", help="A is a random address")
    h = sub.add_parser("hostile")
    h.add_argument("--control", required=True, help="the file whose last line is the case")
    h.add_argument("--name", default="bumble-hostile")
    h.add_argument("--address", default="C0:FF:EE:00:10:01")
    q = sub.add_parser("quirks")
    q.add_argument("--name", default="bumble-quirks")
    q.add_argument("--address", default="C0:FF:EE:00:20:01")
    e = sub.add_parser("secure")
    e.add_argument("--pairing-mode", required=True, help="pairing is accepted while this exists")
    e.add_argument("--name", default="bumble-secure")
    e.add_argument("--address", default="C0:FF:EE:00:30:01")
    o = sub.add_parser("clone-source")
    o.add_argument("--name", default="bumble-hr")
    o.add_argument("--address", default="C0:FF:EE:00:40:01")
    args = parser.parse_args()
    run = {"sensor": sensor, "central": central, "pair-central": pair_central,
           "pair-peripheral": pair_peripheral, "hostile": hostile, "quirks": quirks,
           "secure": secure, "clone-source": clone_source}[args.mode]
    sys.exit(asyncio.run(run(args)) or 0)


if __name__ == "__main__":
    main()
