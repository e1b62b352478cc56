"""For the stand-in bluetoothds (bench/receive/fake_peer.py, bench/scan/fake_flood.py):
dbus-fast (5.2) treats a full socket buffer (EAGAIN: the bus daemon is not reading from us,
busy or held back by a slow receiver) as a lost connection and drops it. `patient(bus)` makes
EAGAIN "0 bytes written", after which dbus-fast waits until the socket is writable again.
Only `send`: a message carrying file descriptors goes through `sendmsg`, which stays as it is
(dbus-fast would drop the descriptors on a retry; failing loudly is better)."""


class PatientSocket:
    def __init__(self, sock):
        self.sock = sock

    def send(self, data):
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0

    def __getattr__(self, name):
        return getattr(self.sock, name)


def patient(bus):
    """Wraps a connected dbus_fast.aio.MessageBus's socket; returns the bus."""
    bus._writer.sock = PatientSocket(bus._writer.sock)
    return bus
