/* floor: the C floor of scripts/bench-receive. Against bench/receive/fake_peer.py on the bus
 * in DBUS_SYSTEM_BUS_ADDRESS: Device1.Connect, GattCharacteristic1.AcquireNotify, then read
 * the socket (one value per read) until the literal EOM, append every value, and write the
 * message to standard output. No scan, no GATT walk, no checks beyond the protocol's: what
 * any receiver of this message must do at least.
 *   floor DEVICE-PATH CHARACTERISTIC-PATH
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static DBusMessage *call(DBusConnection *c, const char *path, const char *interface,
                         const char *member, int with_options) {
  DBusMessage *m = dbus_message_new_method_call("org.bluez", path, interface, member);
  if (with_options) {
    DBusMessageIter iter, dict;
    dbus_message_iter_init_append(m, &iter);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_close_container(&iter, &dict);
  }
  DBusError err;
  dbus_error_init(&err);
  DBusMessage *r = dbus_connection_send_with_reply_and_block(c, m, -1, &err);
  dbus_message_unref(m);
  if (!r) {
    fprintf(stderr, "floor: %s: %s\n", member, err.message);
    exit(1);
  }
  return r;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: floor DEVICE-PATH CHARACTERISTIC-PATH\n");
    return 2;
  }
  DBusError err;
  dbus_error_init(&err);
  DBusConnection *c = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
  if (!c) {
    fprintf(stderr, "floor: %s\n", err.message);
    return 1;
  }
  dbus_message_unref(call(c, argv[1], "org.bluez.Device1", "Connect", 0));
  DBusMessage *r = call(c, argv[2], "org.bluez.GattCharacteristic1", "AcquireNotify", 1);
  int fd = -1;
  dbus_uint16_t mtu = 0;
  if (!dbus_message_get_args(r, &err, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, &mtu,
                             DBUS_TYPE_INVALID)) {
    fprintf(stderr, "floor: AcquireNotify reply: %s\n", err.message);
    return 1;
  }
  dbus_message_unref(r);
  size_t size = 0, capacity = 1 << 16;
  unsigned char *message = malloc(capacity);
  unsigned char *value = malloc(mtu);
  for (;;) {
    ssize_t n = read(fd, value, mtu);
    if (n <= 0) {
      fprintf(stderr, "floor: the socket ended before EOM\n");
      return 1;
    }
    if (n == 3 && memcmp(value, "EOM", 3) == 0) break;
    if (size + (size_t)n > capacity) {
      while (size + (size_t)n > capacity) capacity *= 2;
      message = realloc(message, capacity);
    }
    memcpy(message + size, value, (size_t)n);
    size += (size_t)n;
  }
  close(fd);
  for (size_t done = 0; done < size;) {
    ssize_t n = write(1, message + done, size - done);
    if (n <= 0) return 1;
    done += (size_t)n;
  }
  dbus_message_unref(call(c, argv[1], "org.bluez.Device1", "Disconnect", 0));
  dbus_connection_close(c);
  return 0;
}
